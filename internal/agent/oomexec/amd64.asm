# The OOM trampoline for linux/amd64 (GNU as): see ../oomexec.go.
#   argv: [report fd as one digit, path, argv0, argv1, ...]
# Raises its own oom_score_adj to 1000 and execs path with argv0...; the
# report fd, close-on-exec, reads EOF when the exec succeeds. On failure it
# gets 8 bytes, the stage (1 the score, 2 the exec) and the errno, each a
# little-endian uint32, and the trampoline exits 127.
	.text
	.globl	_start
_start:
	mov	(%rsp), %rbx		# rbx = argc
	lea	8(%rsp), %r12		# r12 = argv
	mov	(%r12), %rax
	movzbl	(%rax), %r13d
	sub	$'0', %r13d		# r13 = the report fd
	mov	$72, %eax		# fcntl(r13, F_SETFD, FD_CLOEXEC)
	mov	%r13d, %edi
	mov	$2, %esi
	mov	$1, %edx
	syscall
	mov	$1, %r15d		# stage 1
	mov	$257, %eax		# openat(AT_FDCWD, path, O_WRONLY|O_CLOEXEC)
	mov	$-100, %rdi
	lea	path(%rip), %rsi
	mov	$0x80001, %edx
	syscall
	test	%rax, %rax
	js	fail
	mov	%rax, %rdi		# write(fd, "1000", 4)
	mov	$1, %eax
	lea	score(%rip), %rsi
	mov	$4, %edx
	syscall
	test	%rax, %rax
	js	fail
	mov	$2, %r15d		# stage 2
	mov	$59, %eax		# execve(argv[1], argv+2, envp)
	mov	8(%r12), %rdi
	lea	16(%r12), %rsi
	lea	8(%r12,%rbx,8), %rdx
	syscall
fail:					# rax = -errno
	neg	%eax
	shl	$32, %rax
	or	%r15, %rax
	push	%rax			# the report: stage, errno
	mov	$1, %eax		# write(r13, rsp, 8)
	mov	%r13d, %edi
	mov	%rsp, %rsi
	mov	$8, %edx
	syscall
	mov	$231, %eax		# exit_group(127)
	mov	$127, %edi
	syscall
path:	.asciz	"/proc/self/oom_score_adj"
score:	.ascii	"1000"
