package quantity

import "testing"

func TestParseCPU(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"500m", 500, true}, {"1", 1000, true}, {"0.25", 250, true}, {"2.5", 2500, true},
		{"", 0, false}, {"0", 0, false}, {"-1", 0, false}, {"abc", 0, false}, {"m", 0, false},
		{"1e9", 0, false}, {"NaN", 0, false}, {"Inf", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseCPU(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseCPU(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512Mi", 512 << 20, true}, {"1Gi", 1 << 30, true}, {"1G", 1e9, true}, {"100", 100, true},
		{"1.5Gi", 3 << 29, true}, {"64Ki", 64 << 10, true},
		{"", 0, false}, {"0", 0, false}, {"-1Gi", 0, false}, {"1Xi", 0, false}, {"99999999Ti", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestMebibytes(t *testing.T) {
	tests := []struct {
		b    int64
		want string
	}{
		{0, "0Mi"}, {1<<20 - 1, "0Mi"}, {1 << 20, "1Mi"}, {16<<20 + 5, "16Mi"}, {1 << 30, "1024Mi"},
	}
	for _, tt := range tests {
		if got := Mebibytes(tt.b); got != tt.want {
			t.Errorf("Mebibytes(%d) = %q, want %q", tt.b, got, tt.want)
		}
	}
}
