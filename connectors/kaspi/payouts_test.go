package kaspi_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"
	"github.com/xuri/excelize/v2"

	"github.com/ordersync/ordersync/connectors/kaspi"
	"github.com/ordersync/ordersync/internal/payouts"
	"github.com/ordersync/ordersync/internal/payouts/payoutstest"
)

var updatePayouts = flag.Bool("update", false, "rewrite testdata/payouts.xlsx")

// payoutsSheet is the invented export of testdata/payouts.xlsx: a title row above
// the header, headers spelt as people type them, a sale, its return, a delivery
// charge, a cabinet charge and the total row.
var payoutsSheet = [][]any{
	{"Отчёт по выплатам за сентябрь 2026 (пример, данные выдуманы)"},
	{},
	{"  номер ЗАКАЗА ", "Дата операции", "Тип операции", "Артикул", "Количество", "Сумма", "Комиссия", "Доставка", "Штраф", "К выплате"},
	{"512344101", "16.09.2026", "Продажа", "SKU-8812", 2, 3000.00, 360.00, 0, 0, 2640.00},
	{"512344101", "20.09.2026", "Возврат", "SKU-8812", 2, 3000.00, 360.00, 0, 0, -2640.00},
	{"512344102", "21.09.2026 14:30", "Продажа", "SKU-1", 1, "12 345 678,90", "0,01", 0, 0, 12345678.89},
	{"512344102", "22.09.2026", "Kaspi Доставка", "", "", 0, 0, 1500, 0, -1500},
	{"", "30.09.2026", "Подписка", "", "", 0, 0, 0, 0, -0.01},
	{"Итого", "", "", "", "", "", "", "", "", 12344178.88},
}

func buildXLSX(t *testing.T, sheet string, rows [][]any) []byte {
	t.Helper()
	f := excelize.NewFile()
	defer f.Close()
	if err := f.SetSheetName("Sheet1", sheet); err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		cell, _ := excelize.CoordinatesToCellName(1, i+1)
		if err := f.SetSheetRow(sheet, cell, &r); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := f.Write(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func readPayoutFile(t *testing.T, name string, b []byte) (*kaspi.PayoutFile, error) {
	t.Helper()
	return kaspi.ReadPayouts(name, bytes.NewReader(b), kaspi.PayoutOptions{Location: time.FixedZone("ALMT", 5*3600)})
}

// TestPayoutsTestdata keeps testdata/payouts.xlsx the file payoutsSheet builds
// (go test -run TestPayoutsTestdata -update rewrites it), and reads it.
func TestPayoutsTestdata(t *testing.T) {
	path := filepath.Join("testdata", "payouts.xlsx")
	if *updatePayouts {
		if err := os.WriteFile(path, buildXLSX(t, "Выплаты", payoutsSheet), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestPayoutsTestdata -update writes it)", err)
	}
	pf, err := readPayoutFile(t, path, b)
	if err != nil {
		t.Fatal(err)
	}
	if pf.Sheet != "Выплаты" || len(pf.Lines) != 5 {
		t.Fatalf("sheet %q, %d lines; want «Выплаты», 5", pf.Sheet, len(pf.Lines))
	}
	sum := decimal.Zero
	for _, l := range pf.Lines {
		payoutstest.CheckLine(t, l)
		sum = sum.Add(l.Amount)
	}
	if pf.Total == nil || !pf.Total.Equal(decimal.RequireFromString("12344178.88")) || !sum.Equal(*pf.Total) {
		t.Errorf("total %v, lines sum to %s; want both 12344178.88", pf.Total, sum)
	}
	sale, ret, big, deliv, cab := pf.Lines[0], pf.Lines[1], pf.Lines[2], pf.Lines[3], pf.Lines[4]
	if sale.Kind != payouts.KindSale || sale.OrderID != "512344101" || !sale.AccruedForSale.Equal(decimal.NewFromInt(3000)) ||
		!sale.Commission.Equal(decimal.NewFromInt(-360)) || sale.Currency != "KZT" || sale.SKU != "SKU-8812" ||
		!sale.Date.Equal(time.Date(2026, 9, 16, 0, 0, 0, 0, time.FixedZone("ALMT", 5*3600))) {
		t.Errorf("the sale read as %+v", sale)
	}
	if ret.Kind != payouts.KindReturn || !ret.AccruedForSale.Equal(decimal.NewFromInt(-3000)) ||
		!ret.Commission.Equal(decimal.NewFromInt(360)) || !ret.Amount.Add(sale.Amount).IsZero() {
		t.Errorf("the return read as %+v", ret)
	}
	if payouts.DecimalText(big.AccruedForSale) != "12345678.90" || !big.Commission.Equal(decimal.RequireFromString("-0.01")) {
		t.Errorf("exact amounts read as %s, %s", big.AccruedForSale, big.Commission)
	}
	if deliv.Kind != payouts.KindOrderService || !deliv.Logistics.Equal(decimal.NewFromInt(-1500)) {
		t.Errorf("the delivery read as %+v", deliv)
	}
	if cab.Kind != payouts.KindCabinet || cab.OrderID != "" || !cab.Amount.Equal(decimal.RequireFromString("-0.01")) {
		t.Errorf("the cabinet charge read as %+v", cab)
	}
	// The same file read again is the same lines: importing twice repeats them.
	again, err := readPayoutFile(t, path, b)
	if err != nil {
		t.Fatal(err)
	}
	store := payoutstest.NewMem()
	for i, want := range []payouts.Saved{{Inserted: 5}, {Repeated: 5}} {
		f, err := payouts.Import(t.Context(), store, "kaspi", "payouts.xlsx", []*kaspi.PayoutFile{pf, again}[i].Lines, pf.Total, nil)
		if err != nil || f.Saved != want {
			t.Errorf("import %d: %+v, %v; want %+v", i+1, f.Saved, err, want)
		}
	}
}

func TestPayoutsMissingColumnIsNamed(t *testing.T) {
	t.Parallel()
	rows := [][]any{{"Номер заказа", "Дата операции", "Тип операции", "Комиссия"}, {"1", "16.09.2026", "Продажа", 1}}
	_, err := readPayoutFile(t, "cabinet.xlsx", buildXLSX(t, "Лист1", rows))
	if err == nil {
		t.Fatal("a file without «Сумма» was read")
	}
	for _, want := range []string{"cabinet.xlsx", "«Лист1»", "«Сумма»"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
}

func TestPayoutsBadCellIsNamedAndNothingRead(t *testing.T) {
	t.Parallel()
	rows := [][]any{
		{"Номер заказа", "Дата операции", "Тип операции", "Сумма", "Комиссия"},
		{"1", "16.09.2026", "Продажа", 100, 10},
		{"2", "17.09.2026", "Продажа", "сто", 10},
		{"3", "31.02.2026", "Продажа", 100, 10},
	}
	pf, err := readPayoutFile(t, "bad.xlsx", buildXLSX(t, "Выплаты", rows))
	if err == nil {
		t.Fatalf("a file with bad cells was read: %d lines", len(pf.Lines))
	}
	for _, want := range []string{"bad.xlsx", "«Выплаты»", "row 3, column «Сумма» (D)", `"сто"`, "row 4, column «Дата операции» (B)", "nothing imported"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %s", err, want)
		}
	}
}
