package chaos

// Client and operator operations of the history.
const (
	OpReserve     = "reserve"
	OpPay         = "pay"     // the user's payment call
	OpWebhook     = "webhook" // the provider's signed confirmation
	OpCancel      = "cancel"
	OpGet         = "get"  // GET /reservations/{token}
	OpMine        = "mine" // GET /me/reservations
	OpStock       = "stock"
	OpPause       = "pause"
	OpResume      = "resume"
	OpBlacklist   = "blacklist"
	OpUnblacklist = "unblacklist"
	OpWaitJoin    = "wait_join"  // POST /sales/{id}/waitlist
	OpWaitLeave   = "wait_leave" // DELETE /sales/{id}/waitlist
)
