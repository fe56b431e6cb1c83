/* The tools' command-line layer (loom/internal/cli.h) and the temporaries' registry
 * (loom/internal/files.h): strict numbers, suggestions, getopt_long's use, short temporary
 * names, and the removal a signal handler does. */
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "loom/internal/cli.h"
#include "loom/internal/files.h"

TEST(closest_name_is_a_misspelling_only) {
  static const char *const names[] = {"distance", "chunk", "fuse", "schedule"};
  ASSERT_STREQ(loom__closest("fsue", names, 4), "fuse");  /* a swap */
  ASSERT_STREQ(loom__closest("chnk", names, 4), "chunk"); /* a letter left out */
  ASSERT_STREQ(loom__closest("distanse", names, 4), "distance");
  ASSERT_TRUE(loom__closest("xyz", names, 4) == NULL);  /* nothing near */
  ASSERT_TRUE(loom__closest("fuse", names, 4) == NULL); /* itself is no suggestion */
  ASSERT_TRUE(loom__closest("", names, 4) == NULL);
  char buf[96];
  ASSERT_STREQ(loom__did_you_mean("shedule", names, 4, buf, sizeof buf), " (did you mean 'schedule'?)");
  ASSERT_STREQ(loom__did_you_mean("qqqq", names, 4, buf, sizeof buf), "");
}

TEST(integers_are_read_whole) {
  int64_t v = 0;
  ASSERT_TRUE(loom__cli_parse_int("12", 1, 100, &v) && v == 12);
  ASSERT_TRUE(!loom__cli_parse_int("12x", 1, 100, &v));
  ASSERT_TRUE(!loom__cli_parse_int(" 12", 1, 100, &v));
  ASSERT_TRUE(!loom__cli_parse_int("+12", 1, 100, &v));
  ASSERT_TRUE(!loom__cli_parse_int("", 1, 100, &v));
  ASSERT_TRUE(!loom__cli_parse_int("0", 1, 100, &v));   /* under the range */
  ASSERT_TRUE(!loom__cli_parse_int("101", 1, 100, &v)); /* over it */
  ASSERT_TRUE(!loom__cli_parse_int("-3", 0, 100, &v));  /* no sign where the range has none */
  ASSERT_TRUE(loom__cli_parse_int("-3", -10, 10, &v) && v == -3);
  ASSERT_TRUE(!loom__cli_parse_int("99999999999999999999", 0, INT64_MAX, &v)); /* overflow */
  ASSERT_TRUE(loom__cli_parse_int("9223372036854775807", 0, INT64_MAX, &v) && v == INT64_MAX);
}

TEST(doubles_are_read_whole_and_finite) {
  double d = 0;
  ASSERT_TRUE(loom__cli_parse_double("0.5", 0, 1, &d) && d == 0.5);
  ASSERT_TRUE(loom__cli_parse_double("1e-4", 0, 1, &d) && d == 1e-4);
  ASSERT_TRUE(!loom__cli_parse_double("0.5 ", 0, 1, &d));
  ASSERT_TRUE(!loom__cli_parse_double(" 0.5", 0, 1, &d));
  ASSERT_TRUE(!loom__cli_parse_double("nan", -1e300, 1e300, &d));
  ASSERT_TRUE(!loom__cli_parse_double("1e999", 0, INFINITY, &d));
  ASSERT_TRUE(!loom__cli_parse_double("2", 0, 1, &d));
}

enum { OPT_LIMIT = 256, OPT_JSON };
static const struct option options[] = {{"limits", required_argument, NULL, OPT_LIMIT},
                                        {"json", no_argument, NULL, OPT_JSON},
                                        {"help", no_argument, NULL, 'h'},
                                        {NULL, 0, NULL, 0}};

/* Every key loom__cli_next gives for argv (NULL-terminated), ended by -1 or LOOM__CLI_ERROR. */
static int keys_of(char **argv, int *keys, int max, loom__cli *c) {
  int argc = 0, n = 0;
  while (argv[argc]) argc++;
  *c = (loom__cli){.prog = "test", .synopsis = "test [options]", .options = options, .short_options = "h"};
  for (int k; n < max;) {
    keys[n++] = k = loom__cli_next(c, argc, argv);
    if (k == -1 || k == LOOM__CLI_ERROR) break;
  }
  return n;
}

TEST(options_operands_and_mistakes) {
  loom__cli c;
  int keys[8];
  char *ok[] = {"test", "a.lir", "--limits", "1MiB", "--json", "--", "--b", NULL};
  ASSERT_EQ(keys_of(ok, keys, 8, &c), 3);
  ASSERT_EQ(keys[0], OPT_LIMIT);
  ASSERT_EQ(keys[1], OPT_JSON);
  ASSERT_EQ(keys[2], -1);
  ASSERT_STREQ(ok[c.index], "a.lir"); /* operands moved behind the options, "--b" after "--" */
  ASSERT_STREQ(ok[c.index + 1], "--b");
  char *unknown[] = {"test", "--jsno", NULL};
  ASSERT_EQ(keys_of(unknown, keys, 8, &c), 1);
  ASSERT_EQ(keys[0], LOOM__CLI_ERROR);
  char *prefix[] = {"test", "--limit", "1MiB", NULL}; /* getopt would take it for --limits */
  ASSERT_EQ(keys_of(prefix, keys, 8, &c), 1);
  ASSERT_EQ(keys[0], LOOM__CLI_ERROR);
  char *missing[] = {"test", "--limits", NULL};
  ASSERT_EQ(keys_of(missing, keys, 8, &c), 1);
  ASSERT_EQ(keys[0], LOOM__CLI_ERROR);
  char *no_value[] = {"test", "--json=yes", NULL};
  ASSERT_EQ(keys_of(no_value, keys, 8, &c), 1);
  ASSERT_EQ(keys[0], LOOM__CLI_ERROR);
  char *equals[] = {"test", "--limits=2MiB", NULL};
  ASSERT_EQ(keys_of(equals, keys, 8, &c), 2);
  ASSERT_EQ(keys[0], OPT_LIMIT);
}

static char *work_dir(const char *name) {
  const char *base = getenv("LOOM_BINARY_DIR");
  static char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/core-tests-%s-%d", base ? base : "/tmp", name, (int)getpid());
  mkdir(dir, 0777);
  return dir;
}

TEST(temporary_of_a_longest_name_fits) {
  char *dir = work_dir("temp"), path[2 * PATH_MAX], base[NAME_MAX + 1];
  memset(base, 'n', NAME_MAX);
  base[NAME_MAX] = '\0';
  snprintf(path, sizeof path, "%s/%s", dir, base);
  int fd = -1;
  char *temp = NULL;
  ASSERT_OK(loom__file_create_temp(path, &fd, &temp));
  ASSERT_TRUE(strlen(strrchr(temp, '/') + 1) <= NAME_MAX);
  ASSERT_TRUE(write(fd, "x", 1) == 1);
  close(fd);
  ASSERT_OK(loom__file_commit(temp, path));
  ASSERT_EQ(access(path, F_OK), 0);
  ASSERT_TRUE(access(temp, F_OK) != 0);
  free(temp);
  unlink(path);
  rmdir(dir);
}

TEST(signal_removal_takes_live_temporaries_only) {
  char *dir = work_dir("signal"), a[2 * PATH_MAX], b[2 * PATH_MAX];
  snprintf(a, sizeof a, "%s/a.npy", dir);
  snprintf(b, sizeof b, "%s/b.npy", dir);
  int fa = -1, fb = -1;
  char *ta = NULL, *tb = NULL;
  ASSERT_OK(loom__file_create_temp(a, &fa, &ta));
  ASSERT_OK(loom__file_create_temp(b, &fb, &tb));
  close(fa);
  close(fb);
  ASSERT_OK(loom__file_commit(ta, a)); /* a is the user's now: never removed */
  loom__file_remove_temps();           /* what a SIGTERM handler does */
  ASSERT_EQ(access(a, F_OK), 0);
  ASSERT_TRUE(access(tb, F_OK) != 0);
  free(ta);
  free(tb);
  unlink(a);
  rmdir(dir);
}
