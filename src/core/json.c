/* The streaming JSON writer (json.h). */
#include "core/json.h"

#include <math.h>
#include <string.h>

#include "core/core.h"

void loom__json_init(loom__json *j, FILE *out, bool pretty) {
  memset(j, 0, sizeof *j);
  j->out = out;
  j->pretty = pretty;
}

static void newline_indent(loom__json *j) {
  if (!j->pretty) return;
  fputc('\n', j->out);
  for (int32_t i = 0; i < j->depth; i++) fputs("  ", j->out);
}

/* Everything a value needs before it: a comma and an indent inside an array, nothing after a
 * key. Returns false (and marks misuse) where no value may go. */
static bool before_value(loom__json *j) {
  if (j->misuse) return false;
  if (j->after_key) {
    j->after_key = false;
    return true;
  }
  if (j->depth == 0) {
    /* One top-level value per document. */
    if (j->has_items[0]) j->misuse = true;
    j->has_items[0] = true;
    return !j->misuse;
  }
  if (j->kind[j->depth - 1] != 'a') {
    j->misuse = true; /* a value in an object without its key */
    return false;
  }
  if (j->has_items[j->depth]) fputc(',', j->out);
  j->has_items[j->depth] = true;
  newline_indent(j);
  return true;
}

static void begin(loom__json *j, char kind) {
  if (!before_value(j)) return;
  if (j->depth + 1 >= LOOM__JSON_MAX_DEPTH) {
    j->misuse = true;
    return;
  }
  fputc(kind == 'o' ? '{' : '[', j->out);
  j->kind[j->depth] = kind;
  j->depth++;
  j->has_items[j->depth] = false;
}

static void end(loom__json *j, char kind) {
  if (j->misuse) return;
  if (j->depth == 0 || j->kind[j->depth - 1] != kind || j->after_key) {
    j->misuse = true;
    return;
  }
  bool had_items = j->has_items[j->depth];
  j->depth--;
  if (had_items) newline_indent(j);
  fputc(kind == 'o' ? '}' : ']', j->out);
}

void loom__json_begin_object(loom__json *j) {
  begin(j, 'o');
}
void loom__json_end_object(loom__json *j) {
  end(j, 'o');
}
void loom__json_begin_array(loom__json *j) {
  begin(j, 'a');
}
void loom__json_end_array(loom__json *j) {
  end(j, 'a');
}

static void write_escaped(FILE *out, const char *s, size_t len) {
  fputc('"', out);
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    switch (c) {
      case '"':
        fputs("\\\"", out);
        break;
      case '\\':
        fputs("\\\\", out);
        break;
      case '\b':
        fputs("\\b", out);
        break;
      case '\f':
        fputs("\\f", out);
        break;
      case '\n':
        fputs("\\n", out);
        break;
      case '\r':
        fputs("\\r", out);
        break;
      case '\t':
        fputs("\\t", out);
        break;
      default:
        if (c < 0x20)
          fprintf(out, "\\u%04x", c);
        else
          fputc(c, out);
    }
  }
  fputc('"', out);
}

void loom__json_key(loom__json *j, const char *key) {
  if (j->misuse) return;
  if (j->depth == 0 || j->kind[j->depth - 1] != 'o' || j->after_key || !key) {
    j->misuse = true;
    return;
  }
  if (j->has_items[j->depth]) fputc(',', j->out);
  j->has_items[j->depth] = true;
  newline_indent(j);
  write_escaped(j->out, key, strlen(key));
  fputs(j->pretty ? ": " : ":", j->out);
  j->after_key = true;
}

void loom__json_string_n(loom__json *j, const char *s, size_t len) {
  if (!before_value(j)) return;
  write_escaped(j->out, s, len);
}

void loom__json_string(loom__json *j, const char *s) {
  if (!s) {
    loom__json_null(j);
    return;
  }
  loom__json_string_n(j, s, strlen(s));
}

void loom__json_int64(loom__json *j, int64_t v) {
  if (!before_value(j)) return;
  fprintf(j->out, "%lld", (long long)v);
}

void loom__json_double(loom__json *j, double v) {
  if (!isfinite(v)) {
    loom__json_null(j);
    return;
  }
  if (!before_value(j)) return;
  /* %.17g round-trips every double; integral values keep a ".0" so readers see a float. */
  char buf[40];
  snprintf(buf, sizeof buf, "%.17g", v);
  fputs(buf, j->out);
  if (!strpbrk(buf, ".eE")) fputs(".0", j->out);
}

void loom__json_bool(loom__json *j, bool v) {
  if (!before_value(j)) return;
  fputs(v ? "true" : "false", j->out);
}

void loom__json_null(loom__json *j) {
  if (!before_value(j)) return;
  fputs("null", j->out);
}

void loom__json_kv_string(loom__json *j, const char *key, const char *s) {
  loom__json_key(j, key);
  loom__json_string(j, s);
}

void loom__json_kv_int64(loom__json *j, const char *key, int64_t v) {
  loom__json_key(j, key);
  loom__json_int64(j, v);
}

void loom__json_kv_double(loom__json *j, const char *key, double v) {
  loom__json_key(j, key);
  loom__json_double(j, v);
}

void loom__json_kv_bool(loom__json *j, const char *key, bool v) {
  loom__json_key(j, key);
  loom__json_bool(j, v);
}

void loom__json_kv_null(loom__json *j, const char *key) {
  loom__json_key(j, key);
  loom__json_null(j);
}

loom_status loom__json_finish(loom__json *j) {
  if (j->misuse || j->depth != 0 || j->after_key || !j->has_items[0])
    return loom__error(LOOM_ERR_INTERNAL, "JSON writer: calls out of order (a bug in the caller)");
  if (j->pretty) fputc('\n', j->out);
  if (fflush(j->out) != 0 || ferror(j->out))
    return loom__error(LOOM_ERR_IO, "JSON writer: cannot write the output");
  return LOOM_OK;
}
