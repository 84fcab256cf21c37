package agent

// withoutReaping runs run (an os/exec Cmd's Output, CombinedOutput or a
// Start to Wait of its own) with the process's reaper held off. Once a test
// of this package has started an agent, the reaper collects every child of
// the test process that exits, and could take a command's exit status
// before os/exec's Wait does ("no child processes", or output cut short);
// children that exit meanwhile are collected once run returns.
func withoutReaping[T any](run func() (T, error)) (T, error) {
	r := processReaper()
	r.mu.Lock()
	defer r.mu.Unlock()
	return run()
}
