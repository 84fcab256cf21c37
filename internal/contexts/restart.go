package contexts

import "context"

// RestartIn restarts context id of sandbox sandboxID: its kernel is ended
// and started again with the same id, language, working directory and
// environment, so its variables and imports are gone. An execution in
// flight ends as its kernel does.
func (s *Service) RestartIn(ctx context.Context, sandboxID, id string) error {
	c, err := s.inSandbox(ctx, sandboxID, id)
	if err != nil {
		return err
	}
	s.dropKernel(ctx, c)
	ac, err := s.sbx.Agent(ctx, c.SandboxID)
	if err != nil {
		return err
	}
	_, err = ac.CreateKernel(ctx, kernelSpec(c))
	return kernelErr(err, c)
}
