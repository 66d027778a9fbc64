package yandexmarket_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/ordersync/ordersync/connectors"
	"github.com/ordersync/ordersync/connectors/yandexmarket"
	"github.com/ordersync/ordersync/internal/sim/ymsim"
)

func TestCheckTellsWhichIDIsWrong(t *testing.T) {
	t.Parallel()
	s := startSim(t, ymsim.Options{})
	for _, tc := range []struct {
		name               string
		business, campaign string
		key                string
		want               []string // in the error; none: no error
	}{
		{"right", strconv.Itoa(business), strconv.Itoa(campaign), apiKey, nil},
		{"no business", "", strconv.Itoa(campaign), apiKey, nil},
		{"swapped", strconv.Itoa(campaign), strconv.Itoa(business), apiKey,
			[]string{"connectors.yandex_market.campaign_id", "swapped"}},
		{"shop id", strconv.Itoa(business), "12345", apiKey, []string{"connectors.yandex_market.campaign_id", "likely wrong"}},
		{"other business", "999", strconv.Itoa(campaign), apiKey, []string{"connectors.yandex_market.business_id is likely wrong"}},
		{"wrong key", strconv.Itoa(business), strconv.Itoa(campaign), "wrong", []string{"connectors.yandex_market.api_key"}},
	} {
		c := newConn(t, s, func(cfg *yandexmarket.Config) {
			cfg.BusinessID, cfg.CampaignID, cfg.APIKey = tc.business, tc.campaign, tc.key
		})
		err := c.Check(context.Background())
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && err == nil:
			t.Errorf("%s: no error, want one naming %v", tc.name, tc.want)
		case err != nil:
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: %v, want it to say %q", tc.name, err, w)
				}
			}
		}
		var ae *connectors.AuthError
		if tc.key != apiKey && !errors.As(err, &ae) {
			t.Errorf("%s: %v, want an AuthError", tc.name, err)
		}
	}
}
