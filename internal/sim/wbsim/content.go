package wbsim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// CardsMaxLimit is the most cards one POST /content/v2/get/cards/list returns
// (settings.cursor.limit).
const CardsMaxLimit = 100

// The documented limit of the content methods: 100 requests a minute per seller
// account (one per 600 ms), bursts of 5.
const (
	ContentPerMinute = 100
	ContentBurst     = 5
)

// Card is a product card, as POST /content/v2/get/cards/list lists it.
type Card struct {
	NmID       int64  // the WB article; positive
	ImtID      int64  // the merged card's id; default NmID
	VendorCode string // the seller's article
	Brand      string
	Title      string
	SubjectID  int64
	// Photos is how many photos the card has: settings.filter.withPhoto 0 lists
	// only cards with none, 1 only cards with some, -1 every card.
	Photos int
	Sizes  []Size
	// CreatedAt and UpdatedAt default to the simulator's clock when the card is added;
	// the listing is ordered by UpdatedAt, then NmID.
	CreatedAt, UpdatedAt time.Time
}

// Size is one size of a card: the chrtID stocks are set for, and its barcodes.
type Size struct {
	ChrtID   int64 // positive, unique across the seller's cards
	TechSize string
	WBSize   string
	Skus     []string // barcodes
}

// AddCard adds a card, or replaces the card with the same NmID. It panics on an
// NmID or chrtID that is not positive, or a chrtID another card holds (a mistake
// in a test).
func (s *Wildberries) AddCard(c Card) {
	if c.NmID <= 0 {
		panic(fmt.Sprintf("sim: wildberries: card nmID %d must be positive", c.NmID))
	}
	c.Sizes = slices.Clone(c.Sizes)
	for i := range c.Sizes {
		c.Sizes[i].Skus = slices.Clone(c.Sizes[i].Skus)
	}
	if c.ImtID == 0 {
		c.ImtID = c.NmID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stockLocked()
	for _, sz := range c.Sizes {
		if sz.ChrtID <= 0 {
			panic(fmt.Sprintf("sim: wildberries: card %d: chrtID %d must be positive", c.NmID, sz.ChrtID))
		}
		if nm, ok := st.chrt[sz.ChrtID]; ok && nm != c.NmID {
			panic(fmt.Sprintf("sim: wildberries: card %d: chrtID %d belongs to card %d", c.NmID, sz.ChrtID, nm))
		}
	}
	now := s.now().UTC()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	if c.UpdatedAt.IsZero() {
		c.UpdatedAt = now
	}
	if old, ok := st.cards[c.NmID]; ok {
		for _, sz := range old.Sizes {
			delete(st.chrt, sz.ChrtID)
		}
	}
	for _, sz := range c.Sizes {
		st.chrt[sz.ChrtID] = c.NmID
	}
	st.cards[c.NmID] = &c
}

// RemoveCard deletes a card (moved to the trash: it is no longer listed, and its
// chrtIDs take no stock).
func (s *Wildberries) RemoveCard(nmID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stockLocked()
	if c, ok := st.cards[nmID]; ok {
		for _, sz := range c.Sizes {
			delete(st.chrt, sz.ChrtID)
		}
		delete(st.cards, nmID)
	}
}

// SetContentLimit sets the content methods' rate: perMinute requests a minute with
// bursts of burst; perMinute 0 or less sets no limit. The default is the documented
// ContentPerMinute and ContentBurst. The bucket starts full.
func (s *Wildberries) SetContentLimit(perMinute float64, burst int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stockLocked().content.configure(perMinute, burst)
}

// cardsListRequest is the body of POST /content/v2/get/cards/list.
type cardsListRequest struct {
	Settings *struct {
		Sort *struct {
			Ascending bool `json:"ascending"`
		} `json:"sort"`
		Filter *struct {
			WithPhoto  *int   `json:"withPhoto"`
			TextSearch string `json:"textSearch"`
		} `json:"filter"`
		Cursor *struct {
			Limit     int    `json:"limit"`
			UpdatedAt string `json:"updatedAt"`
			NmID      int64  `json:"nmID"`
		} `json:"cursor"`
	} `json:"settings"`
}

type wbCardWire struct {
	NmID       int64            `json:"nmID"`
	ImtID      int64            `json:"imtID"`
	NmUUID     string           `json:"nmUUID"`
	SubjectID  int64            `json:"subjectID"`
	VendorCode string           `json:"vendorCode"`
	Brand      string           `json:"brand"`
	Title      string           `json:"title"`
	Photos     []map[string]any `json:"photos"`
	Sizes      []wbSizeWire     `json:"sizes"`
	CreatedAt  string           `json:"createdAt"`
	UpdatedAt  string           `json:"updatedAt"`
}

type wbSizeWire struct {
	ChrtID   int64    `json:"chrtID"`
	TechSize string   `json:"techSize"`
	Size     string   `json:"wbSize"`
	Skus     []string `json:"skus"`
}

// serveCardsList answers POST /content/v2/get/cards/list: the cards the filter
// selects (withPhoto defaults to 0, cards without photos only), ordered by
// updatedAt and nmID (descending unless sort.ascending), limit at a time after the
// cursor's (updatedAt, nmID). The answer's cursor is the last card's, with total the
// number of cards in the answer: a page with total below limit is the last.
func (s *Wildberries) serveCardsList(w http.ResponseWriter, body []byte) {
	var req cardsListRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Settings == nil || req.Settings.Cursor == nil {
		s.writeContentError(w, "Request body can not be decoded: settings.cursor is required")
		return
	}
	cur := req.Settings.Cursor
	if cur.Limit < 1 || cur.Limit > CardsMaxLimit {
		s.writeContentError(w, fmt.Sprintf("settings.cursor.limit: from 1 to %d", CardsMaxLimit))
		return
	}
	var after time.Time
	if (cur.UpdatedAt == "") != (cur.NmID == 0) {
		s.writeContentError(w, "settings.cursor: updatedAt and nmID go together")
		return
	}
	if cur.UpdatedAt != "" {
		t, err := time.Parse(time.RFC3339Nano, cur.UpdatedAt)
		if err != nil {
			s.writeContentError(w, "settings.cursor.updatedAt: "+err.Error())
			return
		}
		after = t
	}
	withPhoto, search := 0, ""
	if f := req.Settings.Filter; f != nil {
		if f.WithPhoto != nil {
			withPhoto = *f.WithPhoto
		}
		search = f.TextSearch
	}
	if withPhoto < -1 || withPhoto > 1 {
		s.writeContentError(w, "settings.filter.withPhoto: -1, 0 or 1")
		return
	}
	ascending := req.Settings.Sort != nil && req.Settings.Sort.Ascending

	s.mu.Lock()
	st := s.stockLocked()
	cards := make([]*Card, 0, len(st.cards))
	for _, c := range st.cards {
		if (withPhoto == 0 && c.Photos > 0) || (withPhoto == 1 && c.Photos == 0) {
			continue
		}
		if search != "" && !wbCardMatches(c, search) {
			continue
		}
		cards = append(cards, c)
	}
	order := func(a, b *Card) int {
		return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), cmp.Compare(a.NmID, b.NmID))
	}
	if !ascending {
		order = func(a, b *Card) int {
			return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), cmp.Compare(b.NmID, a.NmID))
		}
	}
	slices.SortFunc(cards, order)
	out := []wbCardWire{}
	for _, c := range cards {
		if cur.NmID != 0 && order(c, &Card{UpdatedAt: after, NmID: cur.NmID}) <= 0 {
			continue // at or before the cursor
		}
		if len(out) == cur.Limit {
			break
		}
		out = append(out, wbCardJSON(c))
	}
	s.mu.Unlock()

	type cursorWire struct {
		UpdatedAt string `json:"updatedAt"`
		NmID      int64  `json:"nmID"`
		Total     int    `json:"total"`
	}
	next := cursorWire{UpdatedAt: cur.UpdatedAt, NmID: cur.NmID, Total: len(out)}
	if len(out) > 0 {
		last := out[len(out)-1]
		next.UpdatedAt, next.NmID = last.UpdatedAt, last.NmID
	}
	s.writeJSON(w, http.StatusOK, map[string]any{"cards": out, "cursor": next})
}

// wbCardMatches is settings.filter.textSearch: the vendor code, the nmID or a
// barcode, exactly.
func wbCardMatches(c *Card, q string) bool {
	if c.VendorCode == q || strconv.FormatInt(c.NmID, 10) == q {
		return true
	}
	for _, sz := range c.Sizes {
		if slices.Contains(sz.Skus, q) {
			return true
		}
	}
	return false
}

func wbCardJSON(c *Card) wbCardWire {
	out := wbCardWire{
		NmID: c.NmID, ImtID: c.ImtID, NmUUID: fmt.Sprintf("00000000-0000-7000-8000-%012d", c.NmID),
		SubjectID: c.SubjectID, VendorCode: c.VendorCode, Brand: c.Brand, Title: c.Title,
		Photos:    []map[string]any{},
		Sizes:     []wbSizeWire{},
		CreatedAt: c.CreatedAt.UTC().Format(time.RFC3339Nano),
		UpdatedAt: c.UpdatedAt.UTC().Format(time.RFC3339Nano),
	}
	for i := range c.Photos {
		u := fmt.Sprintf("https://basket-01.wbbasket.ru/vol%d/images/big/%d.webp", c.NmID, i+1)
		out.Photos = append(out.Photos, map[string]any{"big": u, "c246x328": u, "c516x688": u, "square": u, "tm": u})
	}
	for _, sz := range c.Sizes {
		skus := slices.Clone(sz.Skus)
		if skus == nil {
			skus = []string{}
		}
		out.Sizes = append(out.Sizes, wbSizeWire{ChrtID: sz.ChrtID, TechSize: sz.TechSize, Size: sz.WBSize, Skus: skus})
	}
	return out
}

// writeContentError answers 400 with the content API's error body.
func (s *Wildberries) writeContentError(w http.ResponseWriter, text string) {
	s.writeJSON(w, http.StatusBadRequest, map[string]any{
		"data": nil, "error": true, "errorText": text, "additionalErrors": nil,
	})
}
