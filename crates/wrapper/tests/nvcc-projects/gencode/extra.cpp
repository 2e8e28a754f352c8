int extra_offset() { return 0; }
