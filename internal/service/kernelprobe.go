package service

import "github.com/agent2env/agent2env/internal/agent"

// JupyterProbeEnv is the environment variable that has a sandbox's agent
// accept connections on JupyterProbeAddr, its loopback, and close them:
// what OpenSandbox's code-interpreter SDK probes to see that a sandbox's
// Jupyter server is up (agent2env's agent runs the kernels itself). A
// surface sets it in the environment of the sandboxes it makes.
const JupyterProbeEnv = agent.EnvJupyterProbe

// JupyterProbeAddr is the address the probe listens on, 127.0.0.1:44771.
const JupyterProbeAddr = agent.JupyterProbeAddr
