package client_test

import (
	"os"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"

	"github.com/seckill/seckill/client"
)

// operations maps every operationId of api/openapi.yaml to the client's
// method for it (a method expression, so a renamed method fails to build).
var operations = map[string]any{
	"getHealth":               (*client.Client).Health,
	"getReady":                (*client.Client).Ready,
	"getMetrics":              (*client.Client).Metrics,
	"getOpenAPI":              (*client.Client).OpenAPI,
	"getStorefront":           (*client.Client).Storefront,
	"getWebFile":              (*client.Client).WebFile,
	"devLogin":                (*client.Client).DevLogin,
	"getSale":                 (*client.Client).Sale,
	"listSalesPublic":         (*client.Client).SaleList,
	"reserve":                 (*client.Client).ReserveWithPass,
	"listMyReservations":      (*client.Client).MyReservations,
	"getReservation":          (*client.Client).Reservation,
	"streamReservationEvents": (*client.Client).Events,
	"payReservation":          (*client.Client).Pay,
	"cancelReservation":       (*client.Client).Cancel,
	"getChallenge":            (*client.Client).Challenge,
	"redeemChallenge":         (*client.Client).RedeemChallenge,
	"joinWaitlist":            (*client.Client).JoinWaitlist,
	"getWaitlistPosition":     (*client.Client).WaitlistPosition,
	"leaveWaitlist":           (*client.Client).LeaveWaitlist,
	"fileAppeal":              (*client.Client).FileAppeal,
	"paymentWebhook":          (*client.Client).PaymentWebhook,
	"createSale":              (*client.Client).CreateSale,
	"warmUpSale":              (*client.Client).Warmup,
	"pauseSale":               (*client.Client).Pause,
	"resumeSale":              (*client.Client).Resume,
	"stopSale":                (*client.Client).Stop,
	"addStock":                (*client.Client).AddStock,
	"reconcileSale":           (*client.Client).Reconcile,
	"blacklistUser":           (*client.Client).Blacklist,
	"unblacklistUser":         (*client.Client).Unblacklist,
	"updateAllowlist":         (*client.Client).UpdateAllowlist,
	"exemptUser":              (*client.Client).Exempt,
	"unexemptUser":            (*client.Client).Unexempt,
	"listAppeals":             (*client.Client).Appeals,
	"resolveAppeal":           (*client.Client).ResolveAppeal,
	"listRefunds":             (*client.Client).Refunds,
	"listSales":               (*client.Client).SalesPage,
	"getOperatorSale":         (*client.Client).OperatorSale,
	"listAdminAudit":          (*client.Client).Audit,
	"getConsole":              (*client.Client).Console,
	"getConsoleFile":          (*client.Client).Console,
}

// Every operation of api/openapi.yaml has a client method, and the table
// names no operation the document does not have.
func TestEveryOperationHasAMethod(t *testing.T) {
	raw, err := os.ReadFile("../api/openapi.yaml")
	require.NoError(t, err)
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	require.NoError(t, err)
	var ids []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			require.NotEmpty(t, op.OperationID, "%s %s has no operationId", method, path)
			ids = append(ids, op.OperationID)
			require.Contains(t, operations, op.OperationID, "%s %s (%s) has no client method", method, path, op.OperationID)
			require.NotNil(t, operations[op.OperationID])
		}
	}
	for id := range operations {
		require.True(t, slices.Contains(ids, id), "the client maps %s, which api/openapi.yaml does not have", id)
	}
}
