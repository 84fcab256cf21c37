package kube

// NewAgentSecretData exposes newSecretData to the package's tests.
var NewAgentSecretData = newSecretData
