package env

import (
	"errors"
	"strings"
	"testing"

	"github.com/weftccl/weft/internal/errkind"
)

// TestCheck: values of the wrong form are ErrInvalidArgument naming the
// variable and its accepted form; good values and unset variables pass.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name, value string
		ok          bool
		says        string
	}{
		{"WEFT_TIMEOUT", "abc", false, "positive Go duration"},
		{"WEFT_TIMEOUT", "-1s", false, "positive Go duration"},
		{"WEFT_TIMEOUT", "250ms", true, ""},
		{"WEFT_DEBUG", "LOUD", false, "one of WARN, INFO, TRACE"},
		{"WEFT_DEBUG", "info", true, ""},
		{"WEFT_NVLS", "maybe", false, "one of 0, 1"},
		{"WEFT_NVLS", "1", true, ""},
		{"WEFT_PCIE_P2P", "banana", false, "one of 0, 1"},
		{"WEFT_PCIE_P2P", "0", true, ""},
		{"WEFT_DEBUG_SUBSYS", "INIT,COLL", true, ""},
		{"WEFT_DEBUG_SUBSYS", "INIT,NOPE", false, "comma-separated list"},
		{"WEFT_SOCKET_NSOCKS", "0", false, "1 to 64"},
		{"WEFT_NET", "carrier-pigeon", false, "one of ib, plugin, socket"},
		{"WEFT_JOB_SECRET", "abc", false, "32 to 128 hex digits"},
		{"WEFT_ALGO", "port", true, ""},
		{"WEFT_ALGO", "ring", true, ""},
		{"WEFT_ALGO", "bruck", true, ""},
		{"WEFT_ALGO", "fast", false, "one of ll, hb, port, nvls, ring, tree, bruck"},
	} {
		t.Setenv(tc.name, tc.value)
		err := Check(tc.name)
		if tc.ok {
			if err != nil {
				t.Errorf("%s=%q: %v, want nil", tc.name, tc.value, err)
			}
			continue
		}
		if !errors.Is(err, errkind.ErrInvalidArgument) || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s=%q: %v; want ErrInvalidArgument naming %s and %q", tc.name, tc.value, err, tc.name, tc.says)
		}
		if all := CheckAll(); !errors.Is(all, errkind.ErrInvalidArgument) || !strings.Contains(all.Error(), tc.name) {
			t.Errorf("%s=%q: CheckAll = %v", tc.name, tc.value, all)
		}
		if tc.name == "WEFT_JOB_SECRET" && strings.Contains(err.Error(), tc.value) {
			t.Errorf("the secret's value is in the error: %v", err)
		}
		t.Setenv(tc.name, "")
	}
	t.Setenv("WEFT_TIMEOUT", "abc")
	if _, err := Duration("WEFT_TIMEOUT", 0); !errors.Is(err, errkind.ErrInvalidArgument) {
		t.Errorf("Duration of WEFT_TIMEOUT=abc: %v, want ErrInvalidArgument", err)
	}
}

// TestEveryVariableHasAForm keeps the validation table as complete as
// Table: a WEFT_* variable added without its accepted form fails here.
func TestEveryVariableHasAForm(t *testing.T) {
	for _, v := range Table {
		if _, ok := forms[v.Name]; !ok && strings.HasPrefix(v.Name, "WEFT_") {
			t.Errorf("%s has no accepted form in validate.go's forms", v.Name)
		}
	}
	for name := range forms {
		lookup(name) // panics for a form of an undeclared variable
	}
}

// TestBackendCheck: WEFT_HAL passes any value until a check is installed
// (no backend registered in the binary), and then only the names the check
// accepts, trimmed.
func TestBackendCheck(t *testing.T) {
	saved := backendCheck
	t.Cleanup(func() { backendCheck = saved })

	backendCheck = nil
	t.Setenv("WEFT_HAL", "nosuch")
	if err := Check("WEFT_HAL"); err != nil {
		t.Errorf("WEFT_HAL=nosuch without a registry: %v, want nil", err)
	}
	var asked []string
	SetBackendCheck(func(name string) bool {
		asked = append(asked, name)
		return name == "host"
	})
	t.Setenv("WEFT_HAL", " host ")
	if err := Check("WEFT_HAL"); err != nil {
		t.Errorf("WEFT_HAL=host: %v, want nil", err)
	}
	t.Setenv("WEFT_HAL", "nosuch")
	if err := Check("WEFT_HAL"); !errors.Is(err, errkind.ErrInvalidArgument) || !strings.Contains(err.Error(), "registered backend") {
		t.Errorf("WEFT_HAL=nosuch: %v, want ErrInvalidArgument naming a registered backend", err)
	}
	if want := []string{"host", "nosuch"}; strings.Join(asked, ",") != strings.Join(want, ",") {
		t.Errorf("check asked %q, want %q", asked, want)
	}
}
