/* Files a run writes (outputs, --stats-json, --trace), staged: each is written complete under
 * a temporary name beside its final one (loom/internal/files.h), and only once every one of
 * them is written are they renamed over their final names. A run that fails before then leaves
 * the user's earlier files as they were; a SIGINT or SIGTERM removes the temporaries (and an
 * output folder the run made) through the handler main installs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loom/internal/files.h"
#include "loom_run.h"

int run_stage_file(run_staged *sf, const char *final, const char *flag, const char **out_temp, int *out_fd) {
  if (sf->n == sf->cap) {
    int32_t cap = sf->cap ? 2 * sf->cap : 8;
    run_staged_file *grown = realloc(sf->items, sizeof *grown * (size_t)cap);
    if (!grown) return run_fail(EXIT_RUN, "out of memory");
    sf->items = grown;
    sf->cap = cap;
  }
  int fd = -1;
  char *temp = NULL; /* malloc'd by the library's allocator, which is malloc's */
  if (loom__file_create_temp(final, &fd, &temp))
    return run_fail(EXIT_RUN, "%s: %s", flag, loom_last_error()); /* the message names the file */
  char *copy = strdup(final);
  if (!copy) {
    close(fd);
    loom__file_discard(temp);
    free(temp);
    return run_fail(EXIT_RUN, "out of memory");
  }
  sf->items[sf->n++] = (run_staged_file){.final = copy, .temp = temp, .flag = flag};
  *out_temp = temp;
  if (out_fd)
    *out_fd = fd;
  else
    close(fd);
  return 0;
}

int run_stage_commit(run_staged *sf) {
  /* A folder where a file goes is the one refusal a rename can be seen to meet beforehand:
   * said before any file is replaced. */
  for (int32_t i = 0; i < sf->n; i++) {
    struct stat sb;
    if (stat(sf->items[i].final, &sb) == 0 && S_ISDIR(sb.st_mode))
      return run_fail(EXIT_RUN, "%s %s: a directory is in the way; nothing was written", sf->items[i].flag,
                      sf->items[i].final);
  }
  for (int32_t i = 0; i < sf->n; i++) {
    run_staged_file *f = &sf->items[i];
    if (loom__file_commit(f->temp, f->final))
      return run_fail(EXIT_RUN, "%s %s: %s", f->flag, f->final, loom_last_error());
    free(f->temp);
    f->temp = NULL;
  }
  return 0;
}

void run_stage_free(run_staged *sf) {
  for (int32_t i = 0; i < sf->n; i++) {
    loom__file_discard(sf->items[i].temp); /* NULL once committed */
    free(sf->items[i].temp);
    free(sf->items[i].final);
  }
  free(sf->items);
  memset(sf, 0, sizeof *sf);
}
