// Package ozonsim is a simulated Ozon Seller API: the FBS posting lists in v3 and
// v4, a posting, shipping it, and the stock updates with their limits, with Ozon's
// headers and error body, and faults on demand (Ozon.Faults).
package ozonsim
