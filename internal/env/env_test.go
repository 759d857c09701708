package env

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The committed docs/environment.md must be what Markdown renders now.
func TestEnvironmentPageUpToDate(t *testing.T) {
	got, err := os.ReadFile("../../docs/environment.md")
	if err != nil {
		t.Fatalf("read docs/environment.md: %v (regenerate with `weft env --markdown > docs/environment.md`)", err)
	}
	if string(got) != Markdown() {
		t.Fatal("docs/environment.md is stale: regenerate with `weft env --markdown > docs/environment.md`")
	}
}

func TestUndeclaredPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("reading an undeclared variable did not panic")
		}
	}()
	String("WEFT_NOT_A_VARIABLE")
}

func TestDurationAndRequired(t *testing.T) {
	t.Setenv("WEFT_TIMEOUT", "250ms")
	if d, err := Duration("WEFT_TIMEOUT", time.Second); err != nil || d != 250*time.Millisecond {
		t.Fatalf("Duration = %v, %v; want 250ms", d, err)
	}
	t.Setenv("WEFT_TIMEOUT", "soon")
	if _, err := Duration("WEFT_TIMEOUT", time.Second); err == nil || !strings.Contains(err.Error(), "WEFT_TIMEOUT") {
		t.Fatalf("malformed duration: error %v should name the variable", err)
	}
	t.Setenv("WEFT_REQUIRE", "host, NVLink")
	if !Required("nvlink") || !Required("host") || Required("xgmi") {
		t.Fatal("Required does not follow WEFT_REQUIRE=host, NVLink")
	}
}
