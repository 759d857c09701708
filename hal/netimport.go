package hal

import "fmt"

// HandleOwner is who exported a registration of a [NetDevice], as its
// handle says: the job (a hash of NetConfig.JobID), the exporting rank and
// the incarnation of the exporting NetDevice (a nonce it draws at Open).
// Network backends carry it in every handle ExportPort returns.
type HandleOwner struct {
	Job   uint64
	Rank  int
	Nonce uint64
}

// CheckImport is the check every NetDevice's ImportPort makes of a peer's
// decoded handle h, owned as the handle says, before it resolves it: me
// is the importing NetDevice (its job hash, rank and nonce) and nranks the
// number of ranks of the job. A handle of another job, or of this rank but
// another incarnation (an earlier NetDevice of this process, or another
// process that claims this rank), is refused with an error wrapping
// ErrInvalidUsage; one of a rank outside the job with ErrInvalidArgument.
// The caller prefixes the message with its network and rank.
func CheckImport(h, me HandleOwner, nranks int) error {
	switch {
	case h.Job != me.Job:
		return fmt.Errorf("handle of another job: %w", ErrInvalidUsage)
	case h.Rank < 0 || h.Rank >= nranks:
		return fmt.Errorf("handle of rank %d in a job of %d ranks: %w", h.Rank, nranks, ErrInvalidArgument)
	case h.Rank == me.Rank && h.Nonce != me.Nonce:
		return fmt.Errorf("handle of this rank from another NetDevice (an earlier incarnation?): %w", ErrInvalidUsage)
	}
	return nil
}

// CheckImportAs is CheckImport with the error prefixed as every network's
// ImportPort reports it: "<network>: rank <me.Rank>: import: ...".
func CheckImportAs(network string, h, me HandleOwner, nranks int) error {
	if err := CheckImport(h, me, nranks); err != nil {
		return fmt.Errorf("%s: rank %d: import: %w", network, me.Rank, err)
	}
	return nil
}
