/* OpenCL error codes as Loom statuses, converted at the backend's boundary. */
#ifndef LOOM_OPENCL_STATUS_H
#define LOOM_OPENCL_STATUS_H

#include <CL/cl.h>

#include "core/core.h"

/* The name of an OpenCL error code ("CL_OUT_OF_RESOURCES"), or NULL for an unknown one. */
const char *loom__cl_error_name(cl_int err);

/* The Loom status for an OpenCL error code: out of memory for the resource errors
 * (CL_OUT_OF_RESOURCES, CL_OUT_OF_HOST_MEMORY, CL_MEM_OBJECT_ALLOCATION_FAILURE,
 * CL_INVALID_BUFFER_SIZE), unavailable for a missing platform, device or compiler,
 * unsupported for what a device lacks, internal for the CL_INVALID_* family (Loom passed
 * something wrong). CL_SUCCESS gives LOOM_OK. */
loom_status loom__cl_status_code(cl_int err);

/* Converts `err` from the OpenCL call `call` ("clCreateBuffer") and sets the message
 * "<call>: CL_OUT_OF_RESOURCES (-5)". CL_SUCCESS gives LOOM_OK and sets no message. */
loom_status loom__cl_status(cl_int err, const char *call);

#endif
