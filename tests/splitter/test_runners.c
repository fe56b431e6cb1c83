/* Runner lists (loom_runners_parse): good specs, and bad ones with the entry and column. */
#include <stdlib.h>

#include "harness.h"
#include "loom/testing.h"

TEST(runners_two_on_one_device) {
  loom_runner *r = NULL;
  int32_t n = 0;
  ASSERT_OK(loom_runners_parse("cpu0:64MiB,cpu0:32MiB", &r, &n));
  ASSERT_EQ(n, 2);
  ASSERT_STREQ(r[0].device, "cpu0");
  ASSERT_EQ(r[0].limit, 64ll << 20);
  ASSERT_STREQ(r[1].device, "cpu0");
  ASSERT_EQ(r[1].limit, 32ll << 20);
  free(r);
}

TEST(runners_forms_and_spaces) {
  loom_runner *r = NULL;
  int32_t n = 0;
  ASSERT_OK(loom_runners_parse(" ocl1:1.5GiB , cuda0:2GB,cpu0:123 ,cpu0:64KiB", &r, &n));
  ASSERT_EQ(n, 4);
  ASSERT_STREQ(r[0].device, "ocl1");
  ASSERT_EQ(r[0].limit, 1610612736ll);
  ASSERT_STREQ(r[1].device, "cuda0");
  ASSERT_EQ(r[1].limit, 2000000000ll);
  ASSERT_EQ(r[2].limit, 123);
  ASSERT_EQ(r[3].limit, 65536);
  free(r);
}

/* The spec fails with INVALID_ARGUMENT, a message that starts with `msg`, and no array. */
#define ASSERT_RUNNERS_ERROR(spec, msg)                                                          \
  do {                                                                                           \
    int32_t n_ = 7;                                                                              \
    loom_runner *r_ = (loom_runner *)&n_;                                                        \
    ASSERT_STATUS(loom_runners_parse((spec), &r_, &n_), LOOM_ERR_INVALID_ARGUMENT);              \
    ASSERT_TRUE(r_ == NULL);                                                                     \
    ASSERT_EQ(n_, 0);                                                                            \
    ASSERT_TRUE(strncmp(loom_last_error(), (msg), strlen(msg)) == 0 ||                           \
                (loom_test_fail(__FILE__, __LINE__, "message \"%s\" does not start with \"%s\"", \
                                loom_last_error(), (msg)),                                       \
                 0));                                                                            \
  } while (0)

TEST(runners_bad_byte_size_names_the_column) {
  ASSERT_RUNNERS_ERROR("cpu0:64MiX", "runners 'cpu0:64MiX': cannot read the byte size at column 8");
  ASSERT_RUNNERS_ERROR("cpu0:64MiB,cpu0:",
                       "runners 'cpu0:64MiB,cpu0:': cannot read the byte size at column 17");
  ASSERT_RUNNERS_ERROR("cpu0:1MiB,cpu0:x",
                       "runners 'cpu0:1MiB,cpu0:x': cannot read the byte size at column 16");
  ASSERT_RUNNERS_ERROR(
      "cpu0:1.5B",
      "runners 'cpu0:1.5B': the byte size is not a whole number of bytes, or is too large at column 6");
  ASSERT_RUNNERS_ERROR("cpu0:1MiB, cpu0:-1",
                       "runners 'cpu0:1MiB, cpu0:-1': cannot read the byte size at column 17");
}

/* loom_bytes_parse (--limit): a size read to its end that is too large, or no whole number of
 * bytes, is blamed at its first column, not one past the end (issue 16). */
TEST(bytes_parse_blames_a_column_inside_the_text) {
  int64_t bytes = -1;
  ASSERT_STATUS(loom_bytes_parse("9223372036854775807", &bytes), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(),
                  "byte size '9223372036854775807': the size is not a whole number of "
                  "bytes, or is too large at column 1");
  ASSERT_STATUS(loom_bytes_parse(" 1.5B", &bytes), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "or is too large at column 2");
  ASSERT_STATUS(loom_bytes_parse("12QB", &bytes), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "cannot read it at column 3");
  ASSERT_STATUS(loom_bytes_parse("", &bytes), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_CONTAINS(loom_last_error(), "cannot read it at column 1");
  ASSERT_OK(loom_bytes_parse("1TiB", &bytes));
  ASSERT_EQ(bytes, 1099511627776LL);
}

TEST(runners_bad_device_ids) {
  ASSERT_RUNNERS_ERROR("CPU0:1MiB", "runners 'CPU0:1MiB': expected a device id at column 1");
  ASSERT_RUNNERS_ERROR("cpu:1MiB", "runners 'cpu:1MiB': expected the device's number at column 4");
  ASSERT_RUNNERS_ERROR("cpu0:1MiB,0cpu:1MiB",
                       "runners 'cpu0:1MiB,0cpu:1MiB': expected a device id at column 11");
  ASSERT_RUNNERS_ERROR("cpu0x:1MiB", "runners 'cpu0x:1MiB': expected ':' after the device id at column 5");
  ASSERT_RUNNERS_ERROR("cpu0 1MiB", "runners 'cpu0 1MiB': expected ':' after the device id at column 6");
  ASSERT_RUNNERS_ERROR("cpu0", "runners 'cpu0': expected ':' after the device id at column 5");
  ASSERT_RUNNERS_ERROR(
      "abcdefghijklmnopqrstuvwxyzabcdefgh0:1MiB",
      "runners 'abcdefghijklmnopqrstuvwxyzabcdefgh0:1MiB': the device id is too long at column 1");
}

TEST(runners_bad_lists) {
  ASSERT_RUNNERS_ERROR("cpu0:1MiB,,cpu0:2MiB",
                       "runners 'cpu0:1MiB,,cpu0:2MiB': an entry is empty at column 11");
  ASSERT_RUNNERS_ERROR("cpu0:1MiB,", "runners 'cpu0:1MiB,': an entry is empty at column 11");
  ASSERT_RUNNERS_ERROR("cpu0:0", "runners 'cpu0:0': the limit must be more than 0 bytes at column 6");
  ASSERT_RUNNERS_ERROR("", "runners '': none given");
  ASSERT_RUNNERS_ERROR("   ", "runners '   ': none given");
  loom_runner *r = NULL;
  int32_t n = 0;
  ASSERT_STATUS(loom_runners_parse(NULL, &r, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_STATUS(loom_runners_parse("cpu0:1MiB", NULL, &n), LOOM_ERR_INVALID_ARGUMENT);
}

TEST(runners_parse_leaks_nothing) {
  int64_t live = loom_testing_live_allocations();
  loom_runner *r = NULL;
  int32_t n = 0;
  ASSERT_STATUS(loom_runners_parse("cpu0:1MiB,cpu0:1MiX", &r, &n), LOOM_ERR_INVALID_ARGUMENT);
  ASSERT_OK(loom_runners_parse("cpu0:1MiB,cpu0:2MiB", &r, &n));
  free(r);
  ASSERT_EQ(loom_testing_live_allocations(), live);
}
