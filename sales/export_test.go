package sales

// SetAfterSnapshot installs the rebuild's hook between its database
// snapshot and its script (nil removes it).
func SetAfterSnapshot(f func()) { afterSnapshot = f }
