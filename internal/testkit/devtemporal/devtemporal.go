// Package devtemporal holds the arguments of the Temporal dev server
// (`temporal server start-dev`) that the chaos deployment and the fault
// tests start, so both run the server scripts/temporal.sh runs.
package devtemporal

// Args are the arguments of a headless dev server on 127.0.0.1:port with
// its UI on uiPort, persisting to dbFile.
//
// The server keeps SQLite's WAL journal with synchronous=NORMAL (durable
// across a process kill). It reads search attributes from its cache: the
// dev server's default re-reads them from SQLite on every read (so that an
// attribute created at run time is seen at once), which cost about 16
// reads of the cluster-metadata and namespace rows per order workflow, on
// the one SQLite connection every other write waits for. Ours are
// registered at start; one created later is seen within the cache's
// minute.
func Args(port, uiPort, dbFile, logLevel string) []string {
	return []string{"server", "start-dev", "--headless", "--ip", "127.0.0.1",
		"--port", port, "--ui-port", uiPort,
		"--db-filename", dbFile, "--log-level", logLevel,
		"--sqlite-pragma", "journal_mode=WAL", "--sqlite-pragma", "synchronous=NORMAL",
		"--dynamic-config-value", "system.forceSearchAttributesCacheRefreshOnRead=false",
		// The order workflow's, registered before the server answers.
		"--search-attribute", "SaleId=Int", "--search-attribute", "UserId=Int",
		"--search-attribute", "OrderStatus=Keyword"}
}
