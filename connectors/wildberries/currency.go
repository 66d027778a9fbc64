package wildberries

// currencies maps the ISO 4217 numeric codes Wildberries sends (currencyCode,
// convertedCurrencyCode) to the alphabetic codes of the canonical order: the
// currencies of the countries Wildberries sells in or pays sellers in, and the
// cross-border ones. An unlisted code fails that order with a reason naming the field,
// rather than guessing.
var currencies = map[int]string{
	643: "RUB", // Russian ruble
	398: "KZT", // Kazakhstani tenge
	933: "BYN", // Belarusian ruble
	417: "KGS", // Kyrgyz som
	51:  "AMD", // Armenian dram
	860: "UZS", // Uzbek sum
	972: "TJS", // Tajikistani somoni
	944: "AZN", // Azerbaijani manat
	981: "GEL", // Georgian lari
	498: "MDL", // Moldovan leu
	934: "TMT", // Turkmenistan manat
	496: "MNT", // Mongolian tögrög
	376: "ILS", // Israeli new shekel
	784: "AED", // UAE dirham
	949: "TRY", // Turkish lira
	156: "CNY", // Chinese yuan
	840: "USD", // US dollar
	978: "EUR", // euro
}

// currencyOf returns the alphabetic code of an ISO 4217 numeric code.
func currencyOf(numeric int) (string, bool) {
	c, ok := currencies[numeric]
	return c, ok
}
