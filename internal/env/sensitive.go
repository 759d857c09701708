package env

// Sensitive reports whether a variable's value must never be printed
// (`weft env` shows "(set, hidden)" instead): the job secret.
func Sensitive(name string) bool { return name == "WEFT_JOB_SECRET" }
