package kube

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agent2env/agent2env/internal/agent"
)

// The keys of a sandbox's Secret: the agent's bearer token and its TLS
// certificate and key (PEM), which the Pod's environment takes from it.
const (
	secretKey     = "token"
	secretCertKey = "tls.crt"
	secretKeyKey  = "tls.key"
)

// agentServerName is the name in every agent's certificate, which the
// daemon verifies against that sandbox's certificate alone.
const agentServerName = "agent2env-agent"

// access is what the daemon needs to talk to one sandbox's agent: its
// token, and the TLS configuration that accepts only that agent's
// certificate (nil for the Secrets of daemons that made none: plain TCP).
type access struct {
	token string
	tls   *tls.Config
}

// newSecretData returns a sandbox Secret's data: a random token and a
// self-signed certificate with its key. The agent serves TLS with them on
// the Pod's IP, so that neither the token nor what the daemon and agent
// say crosses the cluster's network in the clear, and the daemon knows it
// reached that sandbox's agent and no other listener.
func newSecretData() (map[string][]byte, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("make the agent's key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: agentServerName},
		DNSNames:     []string{agentServerName},
		NotBefore:    now.Add(-time.Hour), // clocks of nodes differ
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("make the agent's certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		secretKey:     []byte(hex.EncodeToString(b)),
		secretCertKey: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		secretKeyKey:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

// accessOf reads a sandbox Secret's data, which the cluster holds and is
// not taken on trust: a short token or a certificate that does not parse
// is refused.
func accessOf(data map[string][]byte) (access, error) {
	a := access{token: string(data[secretKey])}
	if len(a.token) < 32 {
		return access{}, errors.New("its token is missing or short")
	}
	certPEM, ok := data[secretCertKey]
	if !ok {
		return a, nil // made by a daemon before TLS: the agent serves plain TCP
	}
	block, _ := pem.Decode(certPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return access{}, errors.New("its certificate is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return access{}, fmt.Errorf("its certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	a.tls = &tls.Config{RootCAs: roots, ServerName: agentServerName, MinVersion: tls.VersionTLS13}
	return a, nil
}

// secretEnv is the agent's part of the Pod's environment, from the
// sandbox's Secret: its token and its certificate and key. Those two are
// optional, so that Pods of Secrets made before TLS start as they did.
// The commands, of the agent's user in a Pod, cannot read them there: the
// agent is not dumpable (agent.Run) and gives them none of its variables.
// A Secret volume would be worse: its files are as readable to them as to
// the agent, which cannot remove them.
func secretEnv(secretName string) []corev1.EnvVar {
	ref := func(key string, optional bool) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: key, Optional: &optional,
		}}
	}
	return []corev1.EnvVar{
		{Name: agent.EnvToken, ValueFrom: ref(secretKey, false)},
		{Name: agent.EnvTLSCert, ValueFrom: ref(secretCertKey, true)},
		{Name: agent.EnvTLSKey, ValueFrom: ref(secretKeyKey, true)},
	}
}
