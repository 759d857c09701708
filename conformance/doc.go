// Package conformance is weft's HAL conformance suite: the tests a
// hardware backend (one directory under hal/) must pass before every
// channel and algorithm of weft is expected to work on it.
//
// The suite follows the Vulkan and OpenCL conformance suites: every test
// ends with one of four statuses ([Pass], [Fail], [NotSupported],
// [QualityWarning]) and the run produces a report a vendor can publish
// ([Report], as JSON with the schema of docs/conformance/schema.json, or as
// Markdown). Test bodies are written once, against the contract of package
// [github.com/weftccl/weft/hal], and run on every backend: device-side
// behaviour (put then signal then wait, LL packets, relaxed variants,
// deadlines) is exercised by small plans of package
// [github.com/weftccl/weft/hal/plan] executed through [hal.Executor], so on
// a GPU backend the suite tests the generated kernels, the real device path.
//
// Tests are registered by capability ([Register], [Cases]): a section of the
// suite runs only when the backend offers its capability on the links
// between the ranks (hal.Device.Link); otherwise each of its tests reports
// NotSupported with the backend's reason. Port-mapped and switch-mapped
// sections exist from the start, so adding their tests needs no change to
// the runner.
//
// Ranks are goroutines of one process (each opening its own device) and,
// for the cross-process tests, separate processes started from the current
// executable ([MaybeWorker], [Worker]) that rendezvous through package
// [github.com/weftccl/weft/bootstrap].
//
// A backend named in WEFT_REQUIRE that is unavailable, or whose tests are
// skipped for lack of devices, fails the run instead of skipping, so that a
// run on the hardware cannot pass by skipping.
//
// The suite is itself tested against deliberately broken backends (package
// conformance/internal/mutant, test-only): each breaks one guarantee of the
// contract, and the suite must report Fail for every one of them.
package conformance
