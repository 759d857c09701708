package weft

// SetCloseWaitHook makes f see every poll of Close that finds semaphore
// releases still owed (the rank closing, the ranks that owe them) until
// the returned function restores the previous hook. Tests only; set it
// while no communicator closes.
func SetCloseWaitHook(f func(rank int, peers []int)) (restore func()) {
	old := closeWaitHook
	closeWaitHook = f
	return func() { closeWaitHook = old }
}
