package cuda

import "fmt"

// fakeDriverEnv makes the test binary, re-executed with WEFT_CUDA_LIB set
// to the fake driver, report what the multicast bindings do.
const fakeDriverEnv = "WEFT_TEST_FAKE_DRIVER"

// fakeDriverChild loads the driver WEFT_CUDA_LIB names and prints one line
// per fact.
func fakeDriverChild() int {
	if err := Load(); err != nil {
		fmt.Println("load:", err)
		return 1
	}
	fmt.Println("available:", MulticastAvailable())
	var c Context
	g, err := c.MulticastGetGranularity(4, 1<<21, HandleTypePosixFD, MulticastGranularityRecommended)
	fmt.Printf("granularity: %d %v\n", g, err)
	_, err = c.MulticastCreate(4, 1<<21, HandleTypePosixFD)
	fmt.Printf("create: %v\n", err)
	return 0
}
