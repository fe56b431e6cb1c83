!> Embedding Loom in Fortran: project.lir's projections y = X.w of n points and their sum of
!> squares, planned to fit a cpu0 limit smaller than the data, run on Fortran arrays, and
!> checked against the same computed here with matmul in double precision.
!>
!> Usage: loom_fortran_example [project.lir [runners]]   (runners default "cpu0:1MiB")
!> Exit status 0 when the results match and every stage's peak is within its limit.
program project
  use, intrinsic :: iso_c_binding, only: c_float, c_double, c_int64_t, c_bool
  use loom
  implicit none

  integer, parameter :: n = 200000
  ! The points are the columns of x: Fortran's x(3, n) is the graph's x: f32[n,3].
  real(c_float), allocatable, target :: x(:, :), y(:), y_bad(:, :), y_whole(:)
  real(c_float), target :: w(3), s, s_whole
  logical(c_bool), allocatable, target :: positive(:)
  integer(c_int64_t), target :: top
  real(c_double), allocatable :: y_ref(:)
  real(c_double) :: s_ref, y_err, s_err
  type(loom_context) :: ctx
  type(loom_graph) :: graph, bad, signs
  type(loom_plan) :: plan
  type(loom_run_info) :: info
  character(len=4096) :: path, runners
  integer :: i, j, status
  logical :: ok

  path = 'project.lir'
  runners = 'cpu0:1MiB'
  if (command_argument_count() >= 1) call get_command_argument(1, path)
  if (command_argument_count() >= 2) call get_command_argument(2, runners)

  allocate (x(3, n), y(n))
  do j = 1, n
    do i = 1, 3
      x(i, j) = real(mod(7*i + 13*j, 101), c_float)/101.0_c_float - 0.5_c_float
    end do
  end do
  w = [0.5_c_float, -1.0_c_float, 0.25_c_float]

  call check(loom_context_create(ctx, 'cpu0'), 'loom_context_create')
  call check(loom_graph_load(graph, trim(path)), 'loom_graph_load')
  call check(loom_plan_create(plan, graph, trim(runners)), 'loom_plan_create')
  call check(loom_plan_run(ctx, plan, [loom_arg(x), loom_arg(w)], [loom_arg(y), loom_arg(s)], info), &
             'loom_plan_run')

  y_ref = matmul(real(w, c_double), real(x, c_double))
  s_ref = sum(y_ref**2)
  y_err = maxval(abs(y - y_ref))
  s_err = abs(s - s_ref)/s_ref
  print '(a,i0,a,a)', 'plan: ', loom_plan_stage_count(plan), ' stage(s) for runners ', trim(runners)
  do i = 1, info%n_stages
    print '(a,i0,a,i0,a,i0,a,i0)', '  stage ', i - 1, ': peak ', info%stage_peak_bytes(i), &
      ' B (estimated ', info%stage_estimated_bytes(i), ' B), limit ', info%stage_limit_bytes(i)
  end do
  print '(a,3f10.5)', 'y(1:3) = ', y(1:3)
  print '(a,es14.6,a,es14.6)', 's = ', s, ', reference ', s_ref
  print '(a,es10.2,a,es10.2)', 'max |y - y_ref| = ', y_err, ', |s - s_ref|/s_ref = ', s_err
  ok = y_err <= 1e-5_c_double .and. s_err <= 1e-4_c_double
  ok = ok .and. all(info%stage_peak_bytes <= info%stage_limit_bytes) .and. info%n_stages >= 1

  ! The same graph run whole, with no plan (on cpu0, under LOOM_MEM_LIMIT when set).
  allocate (y_whole(n))
  call check(loom_graph_run(ctx, graph, [loom_arg(x), loom_arg(w)], [loom_arg(y_whole), loom_arg(s_whole)]), &
             'loom_graph_run')
  print '(a,i0,a,i0,a,es10.2)', 'whole graph (', loom_graph_param_count(graph), ' inputs, ', &
    loom_graph_output_count(graph), ' outputs): max |y - y_plan| = ', maxval(abs(y_whole - y))
  ok = ok .and. maxval(abs(y_whole - y_ref)) <= 1e-5_c_double .and. abs(s_whole - s_ref)/s_ref <= 1e-4_c_double

  ! Graphs from text, and other element types: which projections are positive (bool) and the
  ! index of the largest (i64, counting from 0), on an integer copy of y's signs.
  status = loom_graph_parse(signs, 'graph signs(y: f32[200000]) {'//new_line('a')// &
                            '  zero = fill value=0 : f32[200000]'//new_line('a')// &
                            '  pos = gt y zero'//new_line('a')// &
                            '  top = argmax y axis=0'//new_line('a')// &
                            '  return pos, top'//new_line('a')//'}', 'signs.lir')
  call check(status, 'loom_graph_parse')
  allocate (positive(n))
  call check(loom_graph_run(ctx, signs, [loom_arg(y)], [loom_arg(positive), loom_arg(top)]), 'loom_graph_run')
  print '(a,i0,a,i0,a,i0)', 'positive: ', count(positive), ' (expected ', count(y > 0), '), argmax ', top
  ok = ok .and. all(positive .eqv. (y > 0)) .and. top + 1 == maxloc(y, 1)

  ! Errors come back as statuses with a message: an output array of the wrong shape, and .lir
  ! text that does not parse.
  allocate (y_bad(n, 1))
  status = loom_plan_run(ctx, plan, [loom_arg(x), loom_arg(w)], [loom_arg(y_bad), loom_arg(s)])
  print '(a,a,a,a)', 'wrong output shape: ', loom_status_string(status), ': ', loom_last_error()
  ok = ok .and. status == LOOM_ERR_INVALID_ARGUMENT .and. index(loom_last_error(), 'output 1') > 0
  status = loom_plan_run(ctx, plan, [loom_arg(x(1:2, :)), loom_arg(w)], [loom_arg(y), loom_arg(s)])
  print '(a,a,a,a)', 'strided input: ', loom_status_string(status), ': ', loom_last_error()
  ok = ok .and. status == LOOM_ERR_INVALID_ARGUMENT .and. index(loom_last_error(), 'not contiguous') > 0
  status = loom_graph_parse(bad, 'graph g(a: f32[4]) {'//new_line('a')//'  b = frobnicate a'// &
                            new_line('a')//'  return b'//new_line('a')//'}', 'inline.lir')
  print '(a,a,a,a)', 'bad text: ', loom_status_string(status), ': ', loom_last_error()
  ok = ok .and. status == LOOM_ERR_INVALID_ARGUMENT .and. index(loom_last_error(), 'inline.lir:2') > 0

  call loom_plan_destroy(plan)
  call loom_graph_destroy(graph)
  call loom_graph_destroy(bad)
  call loom_graph_destroy(signs)
  call loom_context_destroy(ctx)
  ! The main program's allocatables live until the end (they are saved): freed here, so that
  ! leak checkers (the sanitizer builds' tests) see nothing left.
  deallocate (x, y, y_bad, y_whole, y_ref, positive)
  if (.not. ok) then
    print '(a)', 'FAILED'
    error stop 1
  end if
  print '(a)', 'ok'

contains

  subroutine check(status, what)
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= LOOM_OK) then
      print '(a,a,a,a,a)', what, ': ', loom_status_string(status), ': ', loom_last_error()
      error stop 1
    end if
  end subroutine check

end program project
