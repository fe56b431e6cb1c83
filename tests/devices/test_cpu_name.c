/* The CPU's name as hwloc reports it, padded with blanks by the CPU's brand string on some
 * machines (issue 33: "AMD EPYC 9B45" followed by blanks reached loom-info's JSON and the model
 * files' names), comes out trimmed. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/devices.h"
#include "harness.h"

/* Writes tests/data/topologies/vm-1numa-nogpu.xml with its CPUModel and CPUVendor values
 * replaced by padded ones into `out` (a mkstemp template). False when a file fails. */
static bool padded_topology(char *out) {
  char src[1024];
  const char *data = getenv("LOOM_TEST_DATA");
  snprintf(src, sizeof src, "%s/topologies/vm-1numa-nogpu.xml", data ? data : "tests/data");
  FILE *in = fopen(src, "r");
  int fd = in ? mkstemp(out) : -1;
  FILE *o = fd >= 0 ? fdopen(fd, "w") : NULL;
  if (!o) {
    if (in) fclose(in);
    return false;
  }
  char line[4096];
  while (fgets(line, sizeof line, in)) {
    if (strstr(line, "name=\"CPUModel\""))
      fputs("      <info name=\"CPUModel\" value=\"  AMD EPYC 9B45            \"/>\n", o);
    else if (strstr(line, "name=\"CPUVendor\""))
      fputs("      <info name=\"CPUVendor\" value=\"AuthenticAMD \"/>\n", o);
    else
      fputs(line, o);
  }
  fclose(in);
  return fclose(o) == 0;
}

TEST(cpu_model_without_padding) {
  char path[] = "/tmp/loom-cpu-name-XXXXXX";
  ASSERT_TRUE(padded_topology(path));
  loom__host host;
  ASSERT_OK(loom__host_load(&host, path, true));
  ASSERT_STREQ(host.cpu_model, "AMD EPYC 9B45");
  ASSERT_STREQ(host.cpu_vendor, "AuthenticAMD");
  loom__host_deinit(&host);
  unlink(path);
}
