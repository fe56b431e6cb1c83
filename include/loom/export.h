/* LOOM_API marks the symbols the shared library exports; everything else is hidden. */
#ifndef LOOM_EXPORT_H
#define LOOM_EXPORT_H

#if defined(LOOM_STATIC_DEFINE)
#define LOOM_API
#elif defined(__GNUC__) || defined(__clang__)
#define LOOM_API __attribute__((visibility("default")))
#else
#define LOOM_API
#endif

#endif
