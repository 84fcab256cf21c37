package kube

import (
	"strings"
	"testing"
)

func TestAccessOf(t *testing.T) {
	good, err := newSecretData()
	if err != nil {
		t.Fatal(err)
	}
	with := func(key, value string) map[string][]byte {
		d := map[string][]byte{}
		for k, v := range good {
			d[k] = v
		}
		if value == "" {
			delete(d, key)
		} else {
			d[key] = []byte(value)
		}
		return d
	}
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		wantTLS bool
		wantErr string
	}{
		{"made now", good, true, ""},
		{"made before TLS", with(secretCertKey, ""), false, ""},
		{"no token", with(secretKey, ""), false, "token"},
		{"short token", with(secretKey, "abc"), false, "token"},
		{"certificate not PEM", with(secretCertKey, "garbage"), false, "not PEM"},
		{"PEM but no certificate", with(secretCertKey, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), false, "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := accessOf(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("accessOf = %v, want an error about %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || (a.tls != nil) != tc.wantTLS || a.token != string(tc.data[secretKey]) {
				t.Errorf("accessOf = %+v, %v; want TLS %v and the token", a, err, tc.wantTLS)
			}
		})
	}
}
