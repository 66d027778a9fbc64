// Package wbsim is a simulated Wildberries marketplace API: FBS orders, statuses
// and supplies, stocks and product cards with their documented limits, Wildberries'
// error bodies and rate-limit headers, and faults on demand (Wildberries.Faults).
package wbsim
