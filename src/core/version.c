/* loom_version and loom_version_commit: the release from the public header, the commit from
 * the build (cmake/version.cmake writes it into the build tree each time the library is built,
 * so a rebuild after a commit reports the new one without a new CMake run). */
#include "loom/version.h"

#define LOOM_STR2(x) #x
#define LOOM_STR(x) LOOM_STR2(x)

/* Defined in the build tree's generated loom_commit.c; declared here, its only reader. */
extern const char loom__build_commit[];

const char *loom_version(void) {
  return LOOM_STR(LOOM_VERSION_MAJOR) "." LOOM_STR(LOOM_VERSION_MINOR) "." LOOM_STR(LOOM_VERSION_PATCH);
}

const char *loom_version_commit(void) {
  return loom__build_commit[0] ? loom__build_commit : "unknown";
}
