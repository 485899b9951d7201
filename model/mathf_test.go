package model

import (
	"math"
	"testing"
)

// The portable exp and log agree with the standard library to a few ulps and
// are exact where they must be.
func TestExpLog(t *testing.T) {
	for _, x := range []float64{-700, -88, -20, -1, -1e-9, 0, 1e-12, 0.3465, 0.5, 1, 2.5, 10, 80, 700} {
		got, want := exp(x), math.Exp(x)
		if math.Abs(got-want) > 4e-16*want {
			t.Errorf("exp(%v) = %v, want %v", x, got, want)
		}
	}
	if exp(0) != 1 || exp(-800) != 0 || !math.IsInf(exp(800), 1) {
		t.Errorf("exp edge cases")
	}
	for _, x := range []float64{1e-300, 1e-20, 0.001, 0.5, 0.7071, 0.99999, 1, 1.0001, 1.5, 2, 10, 1e6, 1e300} {
		got, want := log(x), math.Log(x)
		if math.Abs(got-want) > 4e-16*math.Max(1, math.Abs(want)) {
			t.Errorf("log(%v) = %v, want %v", x, got, want)
		}
	}
	if log(1) != 0 || !math.IsInf(log(0), -1) || !math.IsNaN(log(-1)) {
		t.Errorf("log edge cases")
	}
}
