package e2b

import (
	"strconv"
	"strings"
)

// internetOptionalSince is the first version of both E2B SDKs (e2b on
// PyPI and npm) that sends allow_internet_access only when the caller
// sets it. Older ones send true whenever the caller says nothing, so
// from them true is no request for the internet.
var internetOptionalSince = [3]int{2, 51, 0}

// sdkVersion returns the version of the E2B SDK a User-Agent names
// ("e2b-python-sdk/2.7.0", "e2b-js-sdk/2.28.0"; the code interpreters
// send their e2b's), or false for any other client.
func sdkVersion(userAgent string) ([3]int, bool) {
	var v [3]int
	for _, prefix := range []string{"e2b-python-sdk/", "e2b-js-sdk/"} {
		rest, ok := strings.CutPrefix(userAgent, prefix)
		if !ok {
			continue
		}
		rest, _, _ = strings.Cut(rest, " ")
		parts := strings.SplitN(rest, ".", 3)
		if len(parts) != 3 {
			return v, false
		}
		parts[2], _, _ = strings.Cut(parts[2], "-") // a pre-release: 2.7.0-beta.1
		for i, p := range parts {
			n, err := strconv.Atoi(p)
			if err != nil || n < 0 {
				return v, false
			}
			v[i] = n
		}
		return v, true
	}
	return v, false
}

// less reports whether version a comes before b.
func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// sendsInternetByDefault reports whether the SDK of userAgent sends
// allow_internet_access: true when its caller did not set it.
func sendsInternetByDefault(userAgent string) bool {
	v, ok := sdkVersion(userAgent)
	return ok && less(v, internetOptionalSince)
}
