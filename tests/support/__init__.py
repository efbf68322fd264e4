"""What the tests share: fakes, stores, processes, the browser (imported as `support.…`)."""
