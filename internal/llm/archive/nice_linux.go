package archive

import (
	"runtime"
	"syscall"
)

// indexerNice is the scheduling priority of the indexer's thread: it
// yields the CPU to the requests it indexes.
const indexerNice = 10

// lowerPriority runs the calling goroutine on a thread of its own at
// indexerNice for the rest of its life (Linux sets a thread's nice value
// by its id); the thread ends with the goroutine.
func lowerPriority() {
	runtime.LockOSThread()
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), indexerNice)
}
