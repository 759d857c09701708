package cuda

import "fmt"

// Arch returns the NVRTC target for a device of compute capability
// major.minor: "sm_XY", with the architecture-specific "a" suffix where the
// architecture has one that weft's device code relies on (sm_90a for
// Hopper, whose inline PTX needs it; sm_100a and sm_120a for Blackwell).
// The binary then runs on exactly that architecture, which is what a
// per-device JIT wants.
func Arch(major, minor int) string {
	switch {
	case major == 9 && minor == 0, major == 10 && minor == 0, major == 12 && minor == 0:
		return fmt.Sprintf("sm_%d%da", major, minor)
	}
	return fmt.Sprintf("sm_%d%d", major, minor)
}

// ArchFamily returns the plain "sm_XY" name of compute capability
// major.minor, as reported in hal.DeviceInfo.Arch.
func ArchFamily(major, minor int) string { return fmt.Sprintf("sm_%d%d", major, minor) }
