// Package authtoken mints the contract's JWTs (HS256; claims sub, exp,
// role), for the token command, the load generator and tests.
package authtoken

import (
	"fmt"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/seckill/seckill/config"
)

// Roles of the contract.
const (
	RoleUser  = "user"
	RoleAdmin = "admin"
)

// Mint signs a token for userID with role ("" or RoleUser for users,
// RoleAdmin for operators) valid for ttl.
func Mint(secret []byte, userID int64, role string, ttl time.Duration) (string, error) {
	if userID <= 0 {
		return "", fmt.Errorf("mint token: user id must be positive, got %d", userID)
	}
	claims := jwt.MapClaims{
		"sub": strconv.FormatInt(userID, 10),
		"exp": time.Now().Add(ttl).Unix(),
	}
	if role != "" {
		claims["role"] = role
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		return "", fmt.Errorf("mint token: %w", err)
	}
	return tok, nil
}

// MintDev signs with development mode's secrets: an operator's token (user
// 1, signed by the admin secret) when admin, else a user token for userID.
func MintDev(userID int64, admin bool, ttl time.Duration) (string, error) {
	if admin {
		return Mint([]byte(config.DevAdminJWTSecret), 1, RoleAdmin, ttl)
	}
	return Mint([]byte(config.DevJWTSecret), userID, RoleUser, ttl)
}
