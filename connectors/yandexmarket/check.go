package yandexmarket

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/ordersync/ordersync/connectors"
)

// Check reads the campaign (GET /v2/campaigns/{campaignId}) and tells which
// configured id is likely wrong: the listings answer a wrong id with an empty
// list, so a mistake would otherwise go unseen. A key Yandex refuses is a
// *connectors.AuthError naming connectors.yandex_market.api_key; a campaign the
// key cannot reach names connectors.yandex_market.campaign_id (and says so when it
// is the business id, swapped); a campaign of another cabinet than BusinessID
// names connectors.yandex_market.business_id.
func (c *Connector) Check(ctx context.Context) error {
	business, st, err := c.campaignBusiness(ctx, c.cfg.CampaignID)
	if err != nil {
		return err
	}
	if st != http.StatusOK {
		hint := "use the campaign id of GET v2/campaigns (Settings → API and modules), not the shop id the cabinet shows"
		if c.cfg.BusinessID != "" {
			if _, bst, err := c.campaignBusiness(ctx, c.cfg.BusinessID); err == nil && bst == http.StatusOK {
				return fmt.Errorf("%s: %s %s is not a campaign this key reaches (HTTP %d), but %s %s is one: the two are likely swapped",
					c.cfg.Source, keyCampaignID, c.cfg.CampaignID, st, keyBusinessID, c.cfg.BusinessID)
			}
		}
		return fmt.Errorf("%s: %s %s is not a campaign this key reaches (HTTP %d): it is likely wrong; %s",
			c.cfg.Source, keyCampaignID, c.cfg.CampaignID, st, hint)
	}
	if c.cfg.BusinessID != "" && business != 0 && strconv.FormatInt(business, 10) != c.cfg.BusinessID {
		return fmt.Errorf("%s: %s %s is not the cabinet of campaign %s (its cabinet is %d): %s is likely wrong",
			c.cfg.Source, keyBusinessID, c.cfg.BusinessID, c.cfg.CampaignID, business, keyBusinessID)
	}
	return nil
}

// campaignBusiness reads a campaign's cabinet id. A 403 or 404 is returned as its
// status, not an error: the campaign id is then what is wrong, not the key.
func (c *Connector) campaignBusiness(ctx context.Context, campaign string) (int64, int, error) {
	what := "read campaign " + campaign
	resp, err := connectors.Read(c.http.R().SetContext(ctx)).Get("/v2/campaigns/" + campaign)
	if err == nil && (resp.StatusCode() == http.StatusForbidden || resp.StatusCode() == http.StatusNotFound) {
		return 0, resp.StatusCode(), nil
	}
	if err := connectors.Check(c.cfg.Source, keyAPIKey, what, resp, err); err != nil {
		return 0, 0, err
	}
	var ans struct {
		Campaign *struct {
			Business *struct {
				ID json.Number `json:"id"`
			} `json:"business"`
		} `json:"campaign"`
	}
	if err := json.Unmarshal(resp.Body(), &ans); err != nil || ans.Campaign == nil {
		return 0, 0, fmt.Errorf("%s: %s: the answer is not {\"campaign\":…}", c.cfg.Source, what)
	}
	var business int64
	if ans.Campaign.Business != nil {
		business, _ = ans.Campaign.Business.ID.Int64()
	}
	return business, http.StatusOK, nil
}
