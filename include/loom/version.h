/* Which Loom this is: the release numbers a program compiles against (the macros) and the
 * library it runs with, down to the commit it was built from (the functions). */
#ifndef LOOM_VERSION_H
#define LOOM_VERSION_H

#include "loom/export.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The release a program is compiled against; CMake checks they equal project(VERSION). */
#define LOOM_VERSION_MAJOR 0
#define LOOM_VERSION_MINOR 1
#define LOOM_VERSION_PATCH 0

/* The library's release as "MAJOR.MINOR.PATCH" ("0.1.0"): the library's own, which may differ
 * from the LOOM_VERSION_* macros of the headers a program was compiled with. A static string
 * owned by Loom; never NULL; thread-safe. */
LOOM_API const char *loom_version(void);

/* The git commit the library was built from: the abbreviated hash, with "-dirty" when the
 * working tree had uncommitted changes ("d0de80c1f2a3-dirty"), or "unknown" when it was not
 * built from a git checkout. A static string owned by Loom; never NULL; thread-safe. */
LOOM_API const char *loom_version_commit(void);

#ifdef __cplusplus
}
#endif

#endif
