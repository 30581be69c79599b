package redisgateway

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed retire.lua
	retireSrc    string
	retireScript = redis.NewScript(retireSrc)
)

// RetireAfter is how long an ended reservation's records stay in Redis
// after its release: status reads and replays in that time are answered
// from Redis, later ones from the database.
const RetireAfter = time.Minute

// RetiredRecord is an ended reservation as the database has it.
type RetiredRecord struct {
	Token     string
	UserID    int64
	RequestID string
}

// EndedTokens lists up to n tokens of the sale released before `before`
// whose records are still in Redis, oldest release first.
func (c *Client) EndedTokens(ctx context.Context, saleID int64, before time.Time, n int64) ([]string, error) {
	toks, err := c.rdb.ZRangeByScore(ctx, SaleKeys(saleID).Ended, &redis.ZRangeBy{
		Min: "-inf", Max: strconv.FormatInt(before.UnixMilli(), 10), Count: n,
	}).Result()
	if err != nil {
		return nil, fmt.Errorf("ended tokens of sale %d: %w", saleID, err)
	}
	return toks, nil
}

// Retire moves the records of reservations the database has ended out of
// Redis (see retire.lua) and drops the tokens of others, which the caller
// found live or unknown in the database, from the ended set. Only tokens
// released before `before` go. It answers how many it retired.
func (c *Client) Retire(ctx context.Context, saleID int64, before time.Time, ended []RetiredRecord, others []string) (int, error) {
	k := SaleKeys(saleID)
	argv := make([]any, 0, 2+3*len(ended)+len(others))
	argv = append(argv, before.UnixMilli(), len(ended))
	for _, r := range ended {
		argv = append(argv, r.Token, strconv.FormatInt(r.UserID, 10), r.RequestID)
	}
	for _, t := range others {
		argv = append(argv, t)
	}
	n, err := retireScript.Run(ctx, c.rdb, []string{k.Tokens, k.Requests, k.Status, k.Mine, k.Ended, k.Retired}, argv...).Int()
	if err != nil {
		return 0, fmt.Errorf("retire ended reservations of sale %d: %w", saleID, err)
	}
	return n, nil
}

// presentPage bounds each read of PresentTokens.
const presentPage = 1000

// PresentTokens lists the tokens the sale's Redis keys still name: those of
// the tokens hash and of the inbox's entries. It reads in pages, not
// atomically; a rebuild calls it while no hold can be taken (resync mode).
func (c *Client) PresentTokens(ctx context.Context, saleID int64) (map[string]bool, error) {
	k := SaleKeys(saleID)
	out := map[string]bool{}
	iter := c.rdb.HScan(ctx, k.Tokens, 0, "", presentPage).Iterator()
	for i := 0; iter.Next(ctx); i++ {
		if i%2 == 0 { // fields and values alternate
			out[iter.Val()] = true
		}
	}
	if err := iter.Err(); err != nil {
		return nil, fmt.Errorf("tokens of sale %d: %w", saleID, err)
	}
	from := "-"
	for {
		msgs, err := c.rdb.XRangeN(ctx, k.Inbox, from, "+", presentPage).Result()
		if err != nil {
			return nil, fmt.Errorf("inbox of sale %d: %w", saleID, err)
		}
		for _, e := range parseEntries(msgs) {
			if e.Malformed == nil {
				out[e.Token] = true
			}
		}
		if len(msgs) < presentPage {
			return out, nil
		}
		from = "(" + msgs[len(msgs)-1].ID
	}
}

// SalesWithKeys answers which of the sales still have a key in Redis, in
// one pipeline (one EXISTS of all of a sale's keys, which share a slot).
func (c *Client) SalesWithKeys(ctx context.Context, saleIDs []int64) ([]int64, error) {
	if len(saleIDs) == 0 {
		return nil, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.IntCmd, len(saleIDs))
	for i, id := range saleIDs {
		cmds[i] = pipe.Exists(ctx, SaleKeys(id).All()...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("sales with keys: %w", err)
	}
	var out []int64
	for i, id := range saleIDs {
		if cmds[i].Val() > 0 {
			out = append(out, id)
		}
	}
	return out, nil
}
