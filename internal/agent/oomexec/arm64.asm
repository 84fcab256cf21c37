// The OOM trampoline for linux/arm64 (GNU as): see amd64.asm, which it
// follows instruction for instruction.
	.text
	.globl	_start
_start:
	ldr	x19, [sp]		// x19 = argc
	add	x20, sp, #8		// x20 = argv
	ldr	x0, [x20]
	ldrb	w21, [x0]
	sub	w21, w21, #'0'		// w21 = the report fd
	mov	w0, w21			// fcntl(w21, F_SETFD, FD_CLOEXEC)
	mov	x1, #2
	mov	x2, #1
	mov	x8, #25
	svc	#0
	mov	x22, #1			// stage 1
	mov	x0, #-100		// openat(AT_FDCWD, path, O_WRONLY|O_CLOEXEC)
	adr	x1, path
	mov	x2, #1
	movk	x2, #8, lsl #16
	mov	x8, #56
	svc	#0
	tbnz	x0, #63, fail
	adr	x1, score		// write(fd, "1000", 4)
	mov	x2, #4
	mov	x8, #64
	svc	#0
	tbnz	x0, #63, fail
	mov	x22, #2			// stage 2
	ldr	x0, [x20, #8]		// execve(argv[1], argv+2, envp)
	add	x1, x20, #16
	add	x2, x20, x19, lsl #3
	add	x2, x2, #8
	mov	x8, #221
	svc	#0
fail:					// x0 = -errno
	neg	w0, w0
	lsl	x0, x0, #32
	orr	x0, x0, x22
	str	x0, [sp, #-16]!		// the report: stage, errno
	mov	w0, w21			// write(w21, sp, 8)
	mov	x1, sp
	mov	x2, #8
	mov	x8, #64
	svc	#0
	mov	x0, #127		// exit_group(127)
	mov	x8, #94
	svc	#0
path:	.asciz	"/proc/self/oom_score_adj"
score:	.ascii	"1000"
