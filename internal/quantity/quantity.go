// Package quantity parses the Kubernetes-style resource quantities the API
// uses: CPU as cores or millicores ("1", "0.5", "500m") and sizes with
// binary or decimal suffixes ("512Mi", "1Gi", "1G", "1048576"); and says
// sizes in messages the same way (Mebibytes).
package quantity

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MinMilliCPU is the smallest CPU limit, in millicores, a sandbox can
// have: the kernel's smallest CFS quota (1 ms) of the 100 ms period that
// runtimes use, which crun and runc refuse to go below.
const MinMilliCPU = 10

// MinBytes is the least memory, and the least disk, a sandbox may have.
const MinBytes = 16 << 20

// ParseCPU returns the CPU quantity s in millicores.
func ParseCPU(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if v, ok := strings.CutSuffix(s, "m"); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("cpu %q is not a positive millicore count", s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1e6) {
		return 0, fmt.Errorf("cpu %q is not a positive number of cores", s)
	}
	return int64(math.Round(f * 1000)), nil
}

var suffixes = []struct {
	s string
	m int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"k", 1e3}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// ParseBytes returns the size s in bytes.
func ParseBytes(s string) (int64, error) {
	s = strings.TrimSpace(s)
	num, mult := s, int64(1)
	for _, suf := range suffixes {
		if v, ok := strings.CutSuffix(s, suf.s); ok {
			num, mult = v, suf.m
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || !(f > 0 && f*float64(mult) <= 1<<62) {
		return 0, fmt.Errorf("size %q is not a positive quantity such as 512Mi or 1Gi", s)
	}
	return int64(f * float64(mult)), nil
}

// Mebibytes says size b in whole MiB, rounded down, as a quantity:
// "512Mi".
func Mebibytes(b int64) string { return strconv.FormatInt(b>>20, 10) + "Mi" }
