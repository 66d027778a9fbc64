package main

import "syscall"

// wakeSignal is what a CLI command sends a running service on the same embedded
// database when it has handed it work.
var wakeSignal = syscall.SIGUSR1
