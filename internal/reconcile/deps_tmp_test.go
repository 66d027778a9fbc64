package reconcile

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/xuri/excelize/v2"
	_ "golang.org/x/crypto/bcrypt"
)
