!> The `loom` module: Loom's C API for Fortran programs (iso_c_binding).
!>
!> What it wraps is what a simulation code needs to run a computation written in Loom's IR
!> (a `.lir` file or text) on its own arrays under memory limits: contexts, graphs, plans cut
!> to fit limits, runs on Fortran arrays, and errors. Everything else (the builder API, the
!> memory manager, interop) stays in C (include/loom/*.h).
!>
!> Conventions:
!> - Every fallible call is an integer function returning a status: LOOM_OK (0) on success,
!>   else one of the LOOM_ERR_* codes. On failure, loom_last_error() says what failed and
!>   where; loom_status_string(status) names the code.
!> - Handles (loom_context, loom_graph, loom_plan) start null; the *_create, *_load and
!>   *_parse calls fill them and the matching *_destroy subroutine frees them (a null handle
!>   is accepted and left alone).
!> - Arrays and shapes. Loom's tensors are in C order (row-major). A Fortran array is
!>   column-major, so its memory is the C array of the reversed shape: a Fortran x(3, n) is
!>   the IR's f32[n,3] (each column of x, a point, is one row of the IR's tensor). Write the
!>   .lir with the reversed shapes; loom_arg passes the array's storage with the reversed
!>   shape, without copying, and outputs come back the same way. An array passed with
!>   loom_arg must have the TARGET attribute (its address is kept until the run), be
!>   contiguous, and have at most 8 dimensions.
!> - Element types: real(c_float) f32, real(c_double) f64, complex(c_float_complex) c64,
!>   complex(c_double_complex) c128, integer(c_int8_t) i8, integer(c_int16_t) i16,
!>   integer(c_int32_t) i32, integer(c_int64_t) i64 (argmax/argmin/topk indices are i64 and
!>   count from 0), logical(c_bool) bool.
!> - Thread safety: as the C calls they wrap (a context from one thread at a time). The
!>   messages of this module's own checks (a non-contiguous array, an output array whose
!>   shape does not match) are kept per process, Loom's per thread.
module loom
  use, intrinsic :: iso_c_binding
  implicit none
  private

  !> Status codes (loom/status.h).
  integer, parameter, public :: LOOM_OK = 0
  integer, parameter, public :: LOOM_ERR_INVALID_ARGUMENT = 1
  integer, parameter, public :: LOOM_ERR_OUT_OF_MEMORY = 2
  integer, parameter, public :: LOOM_ERR_UNAVAILABLE = 3
  integer, parameter, public :: LOOM_ERR_UNSUPPORTED = 4
  integer, parameter, public :: LOOM_ERR_NOT_FOUND = 5
  integer, parameter, public :: LOOM_ERR_IO = 6
  integer, parameter, public :: LOOM_ERR_INTERNAL = 7

  !> Element types (loom/tensor.h, loom_dtype), as loom_arg records them.
  integer, parameter, public :: LOOM_BOOL = 0, LOOM_I8 = 1, LOOM_U8 = 2, LOOM_I16 = 3, &
                                LOOM_I32 = 4, LOOM_I64 = 5, LOOM_F16 = 6, LOOM_BF16 = 7, &
                                LOOM_F32 = 8, LOOM_F64 = 9, LOOM_C64 = 10, LOOM_C128 = 11

  !> The most dimensions an array passed to Loom may have.
  integer, parameter, public :: LOOM_MAX_RANK = 8

  !> A context: the devices found and the memory manager (loom_context_create).
  type, public :: loom_context
    type(c_ptr) :: ptr = c_null_ptr
  end type loom_context

  !> A graph parsed from .lir (loom_graph_load, loom_graph_parse).
  type, public :: loom_graph
    type(c_ptr) :: ptr = c_null_ptr
  end type loom_graph

  !> A graph rewritten and cut into stages that fit their runners' limits (loom_plan_create).
  type, public :: loom_plan
    type(c_ptr) :: ptr = c_null_ptr
  end type loom_plan

  !> One input or output of a run: a Fortran array's address, element type and shape (as
  !> the reversed C shape). Made by loom_arg; holds no copy of the data.
  type, public :: loom_arg
    private
    type(c_ptr) :: data = c_null_ptr
    integer(c_int) :: dtype = -1
    integer(c_int32_t) :: rank = 0
    integer(c_int64_t) :: dims(LOOM_MAX_RANK) = 0
    !> Why the array cannot be passed ("" when it can): reported by the run that gets it.
    character(len=80) :: problem = ''
  end type loom_arg

  !> Figures of one run (loom_plan_run, loom_graph_run). Stage arrays are empty for a graph
  !> run.
  type, public :: loom_run_info
    integer(c_int64_t) :: peak_bytes = 0 !< the largest stage peak, as the allocator counted
    real(c_double) :: seconds = 0        !< wall time of the run
    integer :: n_stages = 0
    integer(c_int64_t), allocatable :: stage_peak_bytes(:)      !< measured, per stage
    integer(c_int64_t), allocatable :: stage_estimated_bytes(:) !< the plan's estimate
    integer(c_int64_t), allocatable :: stage_limit_bytes(:)     !< the stage's runner limit
  end type loom_run_info

  public :: loom_last_error, loom_status_string
  public :: loom_context_create, loom_context_destroy
  public :: loom_graph_load, loom_graph_parse, loom_graph_destroy
  public :: loom_graph_param_count, loom_graph_output_count
  public :: loom_plan_create, loom_plan_destroy, loom_plan_stage_count
  public :: loom_plan_run, loom_graph_run

  !> loom_arg(a): describes the Fortran array (or scalar) `a` for a run, without copying it.
  !> `a` must have the TARGET attribute and stay alive and unmoved until the run returns;
  !> Loom reads inputs from it and writes outputs into it.
  interface loom_arg
    module procedure arg_f32, arg_f64, arg_c64, arg_c128, arg_i8, arg_i16, arg_i32, arg_i64, arg_bool
  end interface loom_arg

  ! ---- the C structs this module fills (bind(C) mirrors of loom/*.h) -----------------------

  type, bind(C) :: c_tensor ! loom_tensor: loom_type {dtype, rank, dims[8]} then data
    integer(c_int) :: dtype = 0
    integer(c_int32_t) :: rank = 0
    integer(c_int64_t) :: dims(LOOM_MAX_RANK) = 0
    type(c_ptr) :: data = c_null_ptr
  end type c_tensor

  type, bind(C) :: c_context_options
    type(c_ptr) :: devices = c_null_ptr
  end type c_context_options

  type, bind(C) :: c_stage_stats
    integer(c_int64_t) :: estimated_peak_bytes, peak_bytes, limit_bytes
    real(c_double) :: seconds
  end type c_stage_stats

  ! Mirrors loom_plan_stats field for field: loom_plan_stats_deinit frees both arrays.
  type, bind(C) :: c_plan_stats
    integer(c_int32_t) :: n_stages = 0
    type(c_ptr) :: stages = c_null_ptr
    integer(c_int64_t) :: peak_bytes = 0
    real(c_double) :: seconds = 0
    integer(c_int32_t) :: n_recoveries = 0
    type(c_ptr) :: recoveries = c_null_ptr
    integer(c_int64_t) :: allocations = 0
  end type c_plan_stats

  ! Mirrors loom_run_stats field for field (loom/runtime.h): loom_graph_run clears all of it and
  ! fills the first three; a graph run leaves the arrays NULL.
  type, bind(C) :: c_run_stats
    integer(c_int64_t) :: peak_bytes = 0, allocations = 0
    real(c_double) :: seconds = 0
    integer(c_int32_t) :: n_stages = 0
    type(c_ptr) :: stages = c_null_ptr
    integer(c_int32_t) :: n_recoveries = 0
    type(c_ptr) :: recoveries = c_null_ptr
    integer(c_int32_t) :: n_shared = 0, n_devices = 0
    type(c_ptr) :: devices = c_null_ptr
    integer(c_int32_t) :: rank = 0, n_ranks = 0, n_loop_stages = 0, n_rank_stats = 0
    type(c_ptr) :: ranks = c_null_ptr
    type(c_ptr) :: stage_device = c_null_ptr
    integer(c_int32_t) :: n_ranges = 0
    type(c_ptr) :: ranges = c_null_ptr
  end type c_run_stats

  ! The message of this module's own last failed check; "" when the last failure was Loom's.
  character(len=:), allocatable :: module_error

  interface
    function c_last_error() bind(C, name='loom_last_error')
      import :: c_ptr
      type(c_ptr) :: c_last_error
    end function c_last_error
    function c_status_string(status) bind(C, name='loom_status_string')
      import :: c_ptr, c_int
      integer(c_int), value :: status
      type(c_ptr) :: c_status_string
    end function c_status_string
    subroutine c_clear_error() bind(C, name='loom_clear_error')
    end subroutine c_clear_error
    function c_strlen(s) bind(C, name='strlen')
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: c_strlen
    end function c_strlen
    function c_memcpy(dst, src, n) bind(C, name='memcpy')
      import :: c_ptr, c_size_t
      type(c_ptr), value :: dst, src
      integer(c_size_t), value :: n
      type(c_ptr) :: c_memcpy
    end function c_memcpy
    subroutine c_free(p) bind(C, name='free')
      import :: c_ptr
      type(c_ptr), value :: p
    end subroutine c_free

    subroutine c_context_options_init(opts) bind(C, name='loom_context_options_init')
      import :: c_context_options
      type(c_context_options) :: opts
    end subroutine c_context_options_init
    function c_context_create(opts, out_ctx) bind(C, name='loom_context_create')
      import :: c_int, c_ptr, c_context_options
      type(c_context_options) :: opts
      type(c_ptr) :: out_ctx
      integer(c_int) :: c_context_create
    end function c_context_create
    subroutine c_context_destroy(ctx) bind(C, name='loom_context_destroy')
      import :: c_ptr
      type(c_ptr), value :: ctx
    end subroutine c_context_destroy

    function c_graph_load(path, out_graph) bind(C, name='loom_graph_load')
      import :: c_int, c_ptr, c_char
      character(kind=c_char), dimension(*) :: path
      type(c_ptr) :: out_graph
      integer(c_int) :: c_graph_load
    end function c_graph_load
    function c_graph_parse(text, len, filename, out_graph) bind(C, name='loom_graph_parse')
      import :: c_int, c_ptr, c_char, c_size_t
      character(kind=c_char), dimension(*) :: text, filename
      integer(c_size_t), value :: len
      type(c_ptr) :: out_graph
      integer(c_int) :: c_graph_parse
    end function c_graph_parse
    subroutine c_graph_destroy(graph) bind(C, name='loom_graph_destroy')
      import :: c_ptr
      type(c_ptr), value :: graph
    end subroutine c_graph_destroy
    function c_graph_param_count(graph) bind(C, name='loom_graph_param_count')
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: graph
      integer(c_int32_t) :: c_graph_param_count
    end function c_graph_param_count
    function c_graph_output_count(graph) bind(C, name='loom_graph_output_count')
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: graph
      integer(c_int32_t) :: c_graph_output_count
    end function c_graph_output_count

    function c_runners_parse(spec, out_runners, out_count) bind(C, name='loom_runners_parse')
      import :: c_int, c_ptr, c_char, c_int32_t
      character(kind=c_char), dimension(*) :: spec
      type(c_ptr) :: out_runners
      integer(c_int32_t) :: out_count
      integer(c_int) :: c_runners_parse
    end function c_runners_parse
    function c_runners_fit_mem_limits(runners, n, limits, out_lowered) &
        bind(C, name='loom_runners_fit_mem_limits')
      import :: c_int, c_ptr, c_int32_t
      type(c_ptr), value :: runners, limits, out_lowered
      integer(c_int32_t), value :: n
      integer(c_int) :: c_runners_fit_mem_limits
    end function c_runners_fit_mem_limits
    function c_graph_optimize_for_runners(graph, runners, n, opts, out_graph, report, note, &
                                          note_size) bind(C, name='loom_graph_optimize_for_runners')
      import :: c_int, c_ptr, c_int32_t, c_size_t
      type(c_ptr), value :: graph, runners, opts, report, note
      integer(c_int32_t), value :: n
      type(c_ptr) :: out_graph
      integer(c_size_t), value :: note_size
      integer(c_int) :: c_graph_optimize_for_runners
    end function c_graph_optimize_for_runners
    function c_plan_split_by_memory(graph, runners, n, out_plan) bind(C, name='loom_plan_split_by_memory')
      import :: c_int, c_ptr, c_int32_t
      type(c_ptr), value :: graph, runners
      integer(c_int32_t), value :: n
      type(c_ptr) :: out_plan
      integer(c_int) :: c_plan_split_by_memory
    end function c_plan_split_by_memory
    subroutine c_plan_destroy(plan) bind(C, name='loom_plan_destroy')
      import :: c_ptr
      type(c_ptr), value :: plan
    end subroutine c_plan_destroy
    function c_plan_stage_count(plan) bind(C, name='loom_plan_stage_count')
      import :: c_ptr, c_int32_t
      type(c_ptr), value :: plan
      integer(c_int32_t) :: c_plan_stage_count
    end function c_plan_stage_count
    function c_plan_graph(plan) bind(C, name='loom_plan_graph')
      import :: c_ptr
      type(c_ptr), value :: plan
      type(c_ptr) :: c_plan_graph
    end function c_plan_graph

    function c_plan_run(ctx, plan, inputs, n_inputs, outputs, n_outputs, stats) &
        bind(C, name='loom_plan_run')
      import :: c_int, c_ptr, c_int32_t
      type(c_ptr), value :: ctx, plan, inputs, outputs, stats
      integer(c_int32_t), value :: n_inputs, n_outputs
      integer(c_int) :: c_plan_run
    end function c_plan_run
    subroutine c_plan_stats_deinit(stats) bind(C, name='loom_plan_stats_deinit')
      import :: c_plan_stats
      type(c_plan_stats) :: stats
    end subroutine c_plan_stats_deinit
    function c_graph_run(ctx, graph, inputs, n_inputs, outputs, n_outputs, stats) &
        bind(C, name='loom_graph_run')
      import :: c_int, c_ptr, c_int32_t
      type(c_ptr), value :: ctx, graph, inputs, outputs, stats
      integer(c_int32_t), value :: n_inputs, n_outputs
      integer(c_int) :: c_graph_run
    end function c_graph_run
    function c_graph_run_on_device(ctx, device, graph, inputs, n_inputs, outputs, n_outputs, stats) &
        bind(C, name='loom_graph_run_on_device')
      import :: c_int, c_ptr, c_int32_t, c_char
      type(c_ptr), value :: ctx, graph, inputs, outputs, stats
      character(kind=c_char), dimension(*) :: device
      integer(c_int32_t), value :: n_inputs, n_outputs
      integer(c_int) :: c_graph_run_on_device
    end function c_graph_run_on_device
    subroutine c_tensor_deinit(t) bind(C, name='loom_tensor_deinit')
      import :: c_tensor
      type(c_tensor) :: t
    end subroutine c_tensor_deinit
    function c_type_format(type, buf, size) bind(C, name='loom_type_format')
      import :: c_tensor, c_ptr, c_char, c_size_t
      type(c_tensor) :: type ! a loom_tensor starts with its loom_type
      character(kind=c_char), dimension(*) :: buf
      integer(c_size_t), value :: size
      type(c_ptr) :: c_type_format
    end function c_type_format
    function c_dtype_size(dtype) bind(C, name='loom_dtype_size')
      import :: c_int, c_int64_t
      integer(c_int), value :: dtype
      integer(c_int64_t) :: c_dtype_size
    end function c_dtype_size
  end interface

contains

  ! ---- errors ------------------------------------------------------------------------------

  !> The message of the last failed call: this module's own check where that failed last,
  !> else Loom's (loom_last_error, this thread's). "" when nothing failed.
  function loom_last_error() result(message)
    character(len=:), allocatable :: message
    if (allocated(module_error)) then
      if (len(module_error) > 0) then
        message = module_error
        return
      end if
    end if
    message = c_string(c_last_error())
  end function loom_last_error

  !> A short name for a status code ("out of memory").
  function loom_status_string(status) result(name)
    integer, intent(in) :: status
    character(len=:), allocatable :: name
    name = c_string(c_status_string(int(status, c_int)))
  end function loom_status_string

  ! ---- contexts ----------------------------------------------------------------------------

  !> Creates a context: finds the host's devices and makes the memory manager, with the
  !> limits of the LOOM_MEM_LIMIT environment variable. `devices` (optional) selects devices
  !> as "cpu0,ocl1" or classes ("cpu", "gpu", "opencl", "all"); absent, LOOM_DEVICES or every
  !> device. Free it with loom_context_destroy.
  !> Returns LOOM_OK, LOOM_ERR_INVALID_ARGUMENT (a selection or limit that does not parse),
  !> LOOM_ERR_NOT_FOUND (a device that is not there), LOOM_ERR_UNAVAILABLE, LOOM_ERR_OUT_OF_MEMORY.
  integer function loom_context_create(ctx, devices) result(status)
    type(loom_context), intent(out) :: ctx
    character(len=*), intent(in), optional :: devices
    type(c_context_options) :: opts
    character(kind=c_char), allocatable, target :: buf(:)
    call begin()
    call c_context_options_init(opts)
    if (present(devices)) then
      buf = c_chars(devices)
      opts%devices = c_loc(buf)
    end if
    status = c_context_create(opts, ctx%ptr)
  end function loom_context_create

  !> Destroys a context (and its memory manager); the handle becomes null.
  subroutine loom_context_destroy(ctx)
    type(loom_context), intent(inout) :: ctx
    call c_context_destroy(ctx%ptr)
    ctx%ptr = c_null_ptr
  end subroutine loom_context_destroy

  ! ---- graphs ------------------------------------------------------------------------------

  !> Reads and parses a .lir file into `graph` (freed with loom_graph_destroy).
  !> Returns LOOM_OK, LOOM_ERR_IO (the file cannot be read), LOOM_ERR_INVALID_ARGUMENT (a
  !> syntax, type or name error, with file, line and column in the message).
  integer function loom_graph_load(graph, path) result(status)
    type(loom_graph), intent(out) :: graph
    character(len=*), intent(in) :: path
    call begin()
    status = c_graph_load(c_chars(path), graph%ptr)
  end function loom_graph_load

  !> Parses .lir text (lines separated by new_line('a')) into `graph` (freed with
  !> loom_graph_destroy). `name` (optional) is the file name messages give, default "<text>".
  !> Returns LOOM_OK, LOOM_ERR_INVALID_ARGUMENT (located message), LOOM_ERR_OUT_OF_MEMORY.
  integer function loom_graph_parse(graph, text, name) result(status)
    type(loom_graph), intent(out) :: graph
    character(len=*), intent(in) :: text
    character(len=*), intent(in), optional :: name
    call begin()
    if (present(name)) then
      status = c_graph_parse(c_chars(text), int(len(text), c_size_t), c_chars(name), graph%ptr)
    else
      status = c_graph_parse(c_chars(text), int(len(text), c_size_t), c_chars('<text>'), graph%ptr)
    end if
  end function loom_graph_parse

  !> Destroys a graph; the handle becomes null.
  subroutine loom_graph_destroy(graph)
    type(loom_graph), intent(inout) :: graph
    call c_graph_destroy(graph%ptr)
    graph%ptr = c_null_ptr
  end subroutine loom_graph_destroy

  !> The number of parameters (inputs) of a graph; 0 for a null handle.
  integer function loom_graph_param_count(graph)
    type(loom_graph), intent(in) :: graph
    loom_graph_param_count = int(c_graph_param_count(graph%ptr))
  end function loom_graph_param_count

  !> The number of results (outputs) of a graph; 0 for a null handle.
  integer function loom_graph_output_count(graph)
    type(loom_graph), intent(in) :: graph
    loom_graph_output_count = int(c_graph_output_count(graph%ptr))
  end function loom_graph_output_count

  ! ---- plans -------------------------------------------------------------------------------

  !> Makes a plan for `graph` (which is not changed, and may be destroyed afterwards):
  !> rewrites it for memory, chunking it to the largest limit, and cuts it into stages that
  !> each fit their runner's limit. `runners` names the devices and their limits as
  !> "cpu0:256KiB" or "cpu0:64MiB,ocl0:512MiB"; limits above LOOM_MEM_LIMIT's for the same
  !> device are lowered to it. Free the plan with loom_plan_destroy.
  !> Returns LOOM_OK, LOOM_ERR_INVALID_ARGUMENT (runners or a graph that do not parse or
  !> verify), LOOM_ERR_OUT_OF_MEMORY (an op that cannot fit the largest limit even in pieces,
  !> named in the message).
  integer function loom_plan_create(plan, graph, runners) result(status)
    type(loom_plan), intent(out) :: plan
    type(loom_graph), intent(in) :: graph
    character(len=*), intent(in) :: runners
    type(c_ptr) :: list, optimized
    integer(c_int32_t) :: n
    call begin()
    optimized = c_null_ptr
    status = c_runners_parse(c_chars(runners), list, n)
    if (status /= LOOM_OK) return
    status = c_runners_fit_mem_limits(list, n, c_null_ptr, c_null_ptr)
    if (status == LOOM_OK) &
      status = c_graph_optimize_for_runners(graph%ptr, list, n, c_null_ptr, optimized, c_null_ptr, &
                                            c_null_ptr, 0_c_size_t)
    ! The plan keeps a copy of the graph it cuts, so the optimized one is ours to free.
    if (status == LOOM_OK) status = c_plan_split_by_memory(optimized, list, n, plan%ptr)
    call c_graph_destroy(optimized)
    call c_free(list)
  end function loom_plan_create

  !> Destroys a plan; the handle becomes null.
  subroutine loom_plan_destroy(plan)
    type(loom_plan), intent(inout) :: plan
    call c_plan_destroy(plan%ptr)
    plan%ptr = c_null_ptr
  end subroutine loom_plan_destroy

  !> The number of stages of a plan; 0 for a null handle.
  integer function loom_plan_stage_count(plan)
    type(loom_plan), intent(in) :: plan
    loom_plan_stage_count = int(c_plan_stage_count(plan%ptr))
  end function loom_plan_stage_count

  ! ---- runs --------------------------------------------------------------------------------

  !> Runs a plan's stages in order, each under its runner's limit, reading `inputs` (one
  !> loom_arg per graph parameter, in order) and writing the results into `outputs` (one
  !> loom_arg per result, each an array of exactly the result's element type and reversed
  !> shape). `info` (optional) receives the run's measured peaks and time.
  !> Returns LOOM_OK, LOOM_ERR_INVALID_ARGUMENT (counts, element types or shapes that do not
  !> match the graph's; an array loom_arg could not pass), LOOM_ERR_OUT_OF_MEMORY (a stage
  !> that cannot fit its limit), LOOM_ERR_UNSUPPORTED, and the devices' errors. On failure
  !> the outputs' contents are undefined.
  integer function loom_plan_run(ctx, plan, inputs, outputs, info) result(status)
    type(loom_context), intent(in) :: ctx
    type(loom_plan), intent(in) :: plan
    type(loom_arg), intent(in) :: inputs(:), outputs(:)
    type(loom_run_info), intent(out), optional :: info
    type(c_tensor), target :: cin(max(1, size(inputs))), cout(max(1, size(outputs)))
    type(c_plan_stats), target :: stats
    type(c_stage_stats), pointer :: stages(:)
    integer :: i
    call begin()
    status = check_args(inputs, outputs, cin)
    if (status /= LOOM_OK) return
    status = c_plan_run(ctx%ptr, plan%ptr, c_loc(cin), int(size(inputs), c_int32_t), c_loc(cout), &
                        int(size(outputs), c_int32_t), c_loc(stats))
    if (status == LOOM_OK) status = take_outputs(cout(:size(outputs)), outputs)
    if (present(info)) then
      info%peak_bytes = stats%peak_bytes
      info%seconds = stats%seconds
      info%n_stages = int(stats%n_stages)
      allocate (info%stage_peak_bytes(info%n_stages), info%stage_estimated_bytes(info%n_stages), &
                info%stage_limit_bytes(info%n_stages))
      if (info%n_stages > 0) then
        call c_f_pointer(stats%stages, stages, [info%n_stages])
        do i = 1, info%n_stages
          info%stage_peak_bytes(i) = stages(i)%peak_bytes
          info%stage_estimated_bytes(i) = stages(i)%estimated_peak_bytes
          info%stage_limit_bytes(i) = stages(i)%limit_bytes
        end do
      end if
    end if
    call c_plan_stats_deinit(stats)
  end function loom_plan_run

  !> Runs a whole graph in one piece, with no plan: on cpu0, or on `device` ("ocl0",
  !> "cuda0") when given, under that device's memory limit (LOOM_MEM_LIMIT). Inputs,
  !> outputs, `info` (no stages) and errors as loom_plan_run; LOOM_ERR_NOT_FOUND for a device
  !> the context does not have.
  integer function loom_graph_run(ctx, graph, inputs, outputs, device, info) result(status)
    type(loom_context), intent(in) :: ctx
    type(loom_graph), intent(in) :: graph
    type(loom_arg), intent(in) :: inputs(:), outputs(:)
    character(len=*), intent(in), optional :: device
    type(loom_run_info), intent(out), optional :: info
    type(c_tensor), target :: cin(max(1, size(inputs))), cout(max(1, size(outputs)))
    type(c_run_stats), target :: stats
    call begin()
    status = check_args(inputs, outputs, cin)
    if (status /= LOOM_OK) return
    if (present(device)) then
      status = c_graph_run_on_device(ctx%ptr, c_chars(device), graph%ptr, c_loc(cin), &
                                     int(size(inputs), c_int32_t), c_loc(cout), &
                                     int(size(outputs), c_int32_t), c_loc(stats))
    else
      status = c_graph_run(ctx%ptr, graph%ptr, c_loc(cin), int(size(inputs), c_int32_t), c_loc(cout), &
                           int(size(outputs), c_int32_t), c_loc(stats))
    end if
    if (status == LOOM_OK) status = take_outputs(cout(:size(outputs)), outputs)
    if (present(info)) then
      info%peak_bytes = stats%peak_bytes
      info%seconds = stats%seconds
      allocate (info%stage_peak_bytes(0), info%stage_estimated_bytes(0), info%stage_limit_bytes(0))
    end if
  end function loom_graph_run

  ! ---- loom_arg, one per element type -------------------------------------------------------
  ! Assumed-rank dummies (Fortran 2018) take arrays of any rank and scalars alike; each
  ! specific only records the element type, the rest is describe().

  function arg_f32(a) result(arg)
    real(c_float), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_F32, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_f32

  function arg_f64(a) result(arg)
    real(c_double), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_F64, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_f64

  function arg_c64(a) result(arg)
    complex(c_float_complex), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_C64, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_c64

  function arg_c128(a) result(arg)
    complex(c_double_complex), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_C128, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_c128

  function arg_i8(a) result(arg)
    integer(c_int8_t), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_I8, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_i8

  function arg_i16(a) result(arg)
    integer(c_int16_t), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_I16, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_i16

  function arg_i32(a) result(arg)
    integer(c_int32_t), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_I32, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_i32

  function arg_i64(a) result(arg)
    integer(c_int64_t), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_I64, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_i64

  function arg_bool(a) result(arg)
    logical(c_bool), dimension(..), intent(in), target :: a
    type(loom_arg) :: arg
    arg = describe(LOOM_BOOL, rank(a), shape(a, c_int64_t), is_contiguous(a))
    if (len_trim(arg%problem) == 0 .and. size(a) > 0) arg%data = c_loc(a)
  end function arg_bool

  ! The element type and the reversed shape; a problem instead when the array cannot be
  ! passed in place (a strided section would need a copy that does not outlive loom_arg).
  function describe(dtype, rank, shape, contiguous) result(arg)
    integer, intent(in) :: dtype, rank
    integer(c_int64_t), intent(in) :: shape(:)
    logical, intent(in) :: contiguous
    type(loom_arg) :: arg
    integer :: k
    arg%dtype = int(dtype, c_int)
    if (rank > LOOM_MAX_RANK) then
      write (arg%problem, '(a,i0,a)') 'has ', rank, ' dimensions (Loom takes at most 8)'
      return
    end if
    if (.not. contiguous) then
      arg%problem = 'is not contiguous (pass a copy, e.g. a contiguous temporary array)'
      return
    end if
    arg%rank = int(rank, c_int32_t)
    do k = 1, rank
      arg%dims(k) = shape(rank + 1 - k)
    end do
  end function describe

  ! ---- helpers ------------------------------------------------------------------------------

  ! Clears the messages of earlier failures so loom_last_error reports this call's.
  subroutine begin()
    module_error = ''
    call c_clear_error()
  end subroutine begin

  ! Checks that every argument could be passed and fills the C inputs.
  integer function check_args(inputs, outputs, cin) result(status)
    type(loom_arg), intent(in) :: inputs(:), outputs(:)
    type(c_tensor), intent(out) :: cin(:)
    integer :: i
    status = LOOM_OK
    do i = 1, size(inputs)
      if (len_trim(inputs(i)%problem) > 0) then
        status = fail('input', i, 'the array '//trim(inputs(i)%problem))
        return
      end if
      cin(i) = c_tensor(inputs(i)%dtype, inputs(i)%rank, inputs(i)%dims, inputs(i)%data)
    end do
    do i = 1, size(outputs)
      if (len_trim(outputs(i)%problem) > 0) then
        status = fail('output', i, 'the array '//trim(outputs(i)%problem))
        return
      end if
    end do
  end function check_args

  ! Copies Loom's outputs into the caller's arrays, after checking each matches, and frees
  ! them (all of them, whatever fails).
  integer function take_outputs(cout, outputs) result(status)
    type(c_tensor), intent(inout), target :: cout(:)
    type(loom_arg), intent(in) :: outputs(:)
    integer :: i
    integer(c_int64_t) :: bytes
    type(c_ptr) :: ignored
    status = LOOM_OK
    do i = 1, size(outputs)
      if (status == LOOM_OK) then
        if (cout(i)%dtype /= outputs(i)%dtype .or. cout(i)%rank /= outputs(i)%rank .or. &
            any(cout(i)%dims(:cout(i)%rank) /= outputs(i)%dims(:cout(i)%rank))) then
          status = fail('output', i, 'Loom gives '//type_string(cout(i))//', the array passed is '// &
                        type_string(c_tensor(outputs(i)%dtype, outputs(i)%rank, outputs(i)%dims, &
                                             c_null_ptr))//' (shapes in C order: a Fortran array'// &
                        ' has the reversed shape)')
        else
          bytes = c_dtype_size(cout(i)%dtype)*product(cout(i)%dims(:cout(i)%rank))
          if (bytes > 0) ignored = c_memcpy(outputs(i)%data, cout(i)%data, int(bytes, c_size_t))
        end if
      end if
      call c_tensor_deinit(cout(i))
    end do
  end function take_outputs

  ! Records a message of this module's own and returns LOOM_ERR_INVALID_ARGUMENT.
  integer function fail(what, index, detail) result(status)
    character(len=*), intent(in) :: what, detail
    integer, intent(in) :: index
    character(len=16) :: number
    write (number, '(i0)') index
    module_error = 'loom (Fortran): '//what//' '//trim(number)//': '//detail
    status = LOOM_ERR_INVALID_ARGUMENT
  end function fail

  ! The IR spelling of a tensor's type ("f32[100,3]").
  function type_string(t) result(s)
    type(c_tensor), intent(in) :: t
    character(len=:), allocatable :: s
    character(kind=c_char) :: buf(256)
    type(c_tensor) :: copy
    type(c_ptr) :: p
    integer :: n
    copy = t
    p = c_type_format(copy, buf, int(size(buf), c_size_t))
    n = 0
    do while (n < size(buf))
      if (buf(n + 1) == c_null_char) exit
      n = n + 1
    end do
    allocate (character(len=n) :: s)
    s = transfer(buf(:n), s)
  end function type_string

  ! A Fortran string as a NUL-terminated C string.
  pure function c_chars(s) result(chars)
    character(len=*), intent(in) :: s
    character(kind=c_char), allocatable :: chars(:)
    integer :: i
    allocate (chars(len(s) + 1))
    do i = 1, len(s)
      chars(i) = s(i:i)
    end do
    chars(len(s) + 1) = c_null_char
  end function c_chars

  ! A copy of a NUL-terminated C string; "" for NULL.
  function c_string(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
      s = ''
      return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate (character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function c_string

end module loom
