// Package startup holds the checks of what the real seckill binary does
// when it starts: in production mode it refuses the secrets anyone can read
// (the development defaults and the deployment template's values), before
// it opens anything; started, the API and the worker name their build on
// /metrics (seckill_build_info).
package startup
