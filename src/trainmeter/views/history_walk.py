"""`History.on_snapshot`'s walk of the snapshot tables, written out by `views/history.py`
(`_walk_source`) from its `SNAPSHOT_SERIES` and `SNAPSHOT_COMPLEMENTS`. Do not edit: after a
change to the tables, `python -m trainmeter.views.history` writes it again."""

from ..snapread import finite as _number

_EXACT = 9007199254740992  # integers up to this size are exactly floats


def walk(self, snap, step, tokens, time):
    series_of = self.series
    get = snap.get
    row = [None] * 21
    top = get('tokens_per_s')
    if top is not None:
        if type(top) is float:
            value = top if top - top == 0.0 else None
        elif type(top) is int and -_EXACT <= top <= _EXACT:
            value = float(top)
        else:
            value = _number(top)
        if value is not None:
            if 'tokens_per_s' in series_of:
                row[0] = value
            else:
                self.add('tokens_per_s', 'system', value, step, tokens, time, 'tokens/s', 'Tokens per second')
    top = get('step_time_s')
    if top is not None:
        if type(top) is float:
            value = top if top - top == 0.0 else None
        elif type(top) is int and -_EXACT <= top <= _EXACT:
            value = float(top)
        else:
            value = _number(top)
        if value is not None:
            if 'step_time_s' in series_of:
                row[1] = value
            else:
                self.add('step_time_s', 'system', value, step, tokens, time, 's', 'Step time')
    top = get('mfu')
    if top is not None:
        n1 = top.get('value') if isinstance(top, dict) else None
        if n1 is not None:
            if type(n1) is float:
                value = n1 if n1 - n1 == 0.0 else None
            elif type(n1) is int and -_EXACT <= n1 <= _EXACT:
                value = float(n1)
            else:
                value = _number(n1)
            if value is not None:
                if 'mfu' in series_of:
                    row[2] = value
                else:
                    self.add('mfu', 'system', value, step, tokens, time, 'ratio', 'MFU')
    top = get('ofu')
    if top is not None:
        n1 = top.get('value') if isinstance(top, dict) else None
        if n1 is not None:
            if type(n1) is float:
                value = n1 if n1 - n1 == 0.0 else None
            elif type(n1) is int and -_EXACT <= n1 <= _EXACT:
                value = float(n1)
            else:
                value = _number(n1)
            if value is not None:
                if 'ofu' in series_of:
                    row[3] = value
                else:
                    self.add('ofu', 'system', value, step, tokens, time, 'ratio', 'OFU')
    top = get('time')
    if top is not None:
        n1 = top.get('goodput') if isinstance(top, dict) else None
        if n1 is not None:
            if type(n1) is float:
                value = n1 if n1 - n1 == 0.0 else None
            elif type(n1) is int and -_EXACT <= n1 <= _EXACT:
                value = float(n1)
            else:
                value = _number(n1)
            if value is not None:
                if 'goodput' in series_of:
                    row[4] = value
                else:
                    self.add('goodput', 'system', value, step, tokens, time, 'ratio', 'Goodput')
    top = get('ladder')
    if top is not None:
        n1 = top.get('mean') if isinstance(top, dict) else None
        n2 = n1.get('gpu_util') if isinstance(n1, dict) else None
        if n2 is not None:
            if type(n2) is float:
                value = n2 if n2 - n2 == 0.0 else None
            elif type(n2) is int and -_EXACT <= n2 <= _EXACT:
                value = float(n2)
            else:
                value = _number(n2)
            if value is not None:
                if 'gpu_util' in series_of:
                    row[5] = value
                else:
                    self.add('gpu_util', 'system', value, step, tokens, time, 'ratio', 'GPU util (mean)')
        n3 = n1.get('sm_active') if isinstance(n1, dict) else None
        if n3 is not None:
            if type(n3) is float:
                value = n3 if n3 - n3 == 0.0 else None
            elif type(n3) is int and -_EXACT <= n3 <= _EXACT:
                value = float(n3)
            else:
                value = _number(n3)
            if value is not None:
                if 'sm_active' in series_of:
                    row[6] = value
                else:
                    self.add('sm_active', 'system', value, step, tokens, time, 'ratio', 'SM active (mean)')
        n4 = n1.get('tensor_active') if isinstance(n1, dict) else None
        if n4 is not None:
            if type(n4) is float:
                value = n4 if n4 - n4 == 0.0 else None
            elif type(n4) is int and -_EXACT <= n4 <= _EXACT:
                value = float(n4)
            else:
                value = _number(n4)
            if value is not None:
                if 'tensor_active' in series_of:
                    row[7] = value
                else:
                    self.add('tensor_active', 'system', value, step, tokens, time, 'ratio', 'Tensor active (mean)')
    top = get('gpus')
    if top is not None:
        if isinstance(top, dict):
            numbers = []
            for item in top.values():
                if isinstance(item, dict):
                    item = item.get('power_w')
                    if type(item) is float:
                        value = item if item - item == 0.0 else None
                    elif type(item) is int and -_EXACT <= item <= _EXACT:
                        value = float(item)
                    else:
                        value = _number(item)
                    if value is not None:
                        numbers.append(value)
            if numbers:
                value = sum(numbers)
                if 'power_w' in series_of:
                    row[8] = value
                else:
                    self.add('power_w', 'system', value, step, tokens, time, 'W', 'GPU power (sum)')
        if isinstance(top, dict):
            numbers = []
            for item in top.values():
                if isinstance(item, dict):
                    item = item.get('memory_used_b')
                    if type(item) is float:
                        value = item if item - item == 0.0 else None
                    elif type(item) is int and -_EXACT <= item <= _EXACT:
                        value = float(item)
                    else:
                        value = _number(item)
                    if value is not None:
                        numbers.append(value)
            if numbers:
                value = sum(numbers)
                if 'gpu_memory_used_b' in series_of:
                    row[9] = value
                else:
                    self.add('gpu_memory_used_b', 'system', value, step, tokens, time, 'B', 'GPU memory used (sum)')
    top = get('memory')
    if top is not None:
        n1 = top.get('ranks') if isinstance(top, dict) else None
        if isinstance(n1, dict):
            numbers = []
            for item in n1.values():
                if isinstance(item, dict):
                    item = item.get('reserved_b')
                    if type(item) is float:
                        value = item if item - item == 0.0 else None
                    elif type(item) is int and -_EXACT <= item <= _EXACT:
                        value = float(item)
                    else:
                        value = _number(item)
                    if value is not None:
                        numbers.append(value)
            if numbers:
                value = sum(numbers)
                if 'memory_reserved_b' in series_of:
                    row[10] = value
                else:
                    self.add('memory_reserved_b', 'system', value, step, tokens, time, 'B', 'Reserved by the allocator (sum of ranks)')
        if isinstance(n1, dict):
            numbers = []
            for item in n1.values():
                if isinstance(item, dict):
                    item = item.get('allocated_b')
                    if type(item) is float:
                        value = item if item - item == 0.0 else None
                    elif type(item) is int and -_EXACT <= item <= _EXACT:
                        value = float(item)
                    else:
                        value = _number(item)
                    if value is not None:
                        numbers.append(value)
            if numbers:
                value = sum(numbers)
                if 'memory_allocated_b' in series_of:
                    row[11] = value
                else:
                    self.add('memory_allocated_b', 'system', value, step, tokens, time, 'B', 'Allocated tensors (sum of ranks)')
        n2 = top.get('alloc_retries') if isinstance(top, dict) else None
        if n2 is not None:
            if type(n2) is float:
                value = n2 if n2 - n2 == 0.0 else None
            elif type(n2) is int and -_EXACT <= n2 <= _EXACT:
                value = float(n2)
            else:
                value = _number(n2)
            if value is not None:
                if 'memory_alloc_retries' in series_of:
                    row[12] = value
                else:
                    self.add('memory_alloc_retries', 'system', value, step, tokens, time, 'count', 'Allocation retries')
    top = get('host')
    if top is not None:
        n1 = top.get('rss_b') if isinstance(top, dict) else None
        if n1 is not None:
            if type(n1) is float:
                value = n1 if n1 - n1 == 0.0 else None
            elif type(n1) is int and -_EXACT <= n1 <= _EXACT:
                value = float(n1)
            else:
                value = _number(n1)
            if value is not None:
                if 'host_rss_b' in series_of:
                    row[13] = value
                else:
                    self.add('host_rss_b', 'system', value, step, tokens, time, 'B', "Training processes' memory (RSS)")
        n2 = top.get('cpu_cores') if isinstance(top, dict) else None
        if n2 is not None:
            if type(n2) is float:
                value = n2 if n2 - n2 == 0.0 else None
            elif type(n2) is int and -_EXACT <= n2 <= _EXACT:
                value = float(n2)
            else:
                value = _number(n2)
            if value is not None:
                if 'host_cpu_cores' in series_of:
                    row[14] = value
                else:
                    self.add('host_cpu_cores', 'system', value, step, tokens, time, 'cores', "Training processes' CPU")
    top = get('node')
    if top is not None:
        n1 = top.get('memory') if isinstance(top, dict) else None
        n2 = n1.get('used_b') if isinstance(n1, dict) else None
        if n2 is not None:
            if type(n2) is float:
                value = n2 if n2 - n2 == 0.0 else None
            elif type(n2) is int and -_EXACT <= n2 <= _EXACT:
                value = float(n2)
            else:
                value = _number(n2)
            if value is not None:
                if 'node_memory_used_b' in series_of:
                    row[15] = value
                else:
                    self.add('node_memory_used_b', 'system', value, step, tokens, time, 'B', 'Node memory used')
        n3 = top.get('rates_b_s') if isinstance(top, dict) else None
        n4 = n3.get('disk_io_read_b') if isinstance(n3, dict) else None
        if n4 is not None:
            if type(n4) is float:
                value = n4 if n4 - n4 == 0.0 else None
            elif type(n4) is int and -_EXACT <= n4 <= _EXACT:
                value = float(n4)
            else:
                value = _number(n4)
            if value is not None:
                if 'node_disk_read_b_s' in series_of:
                    row[16] = value
                else:
                    self.add('node_disk_read_b_s', 'system', value, step, tokens, time, 'B/s', 'Disk read')
        n5 = n3.get('disk_io_write_b') if isinstance(n3, dict) else None
        if n5 is not None:
            if type(n5) is float:
                value = n5 if n5 - n5 == 0.0 else None
            elif type(n5) is int and -_EXACT <= n5 <= _EXACT:
                value = float(n5)
            else:
                value = _number(n5)
            if value is not None:
                if 'node_disk_write_b_s' in series_of:
                    row[17] = value
                else:
                    self.add('node_disk_write_b_s', 'system', value, step, tokens, time, 'B/s', 'Disk write')
        n6 = n3.get('net_rx_b') if isinstance(n3, dict) else None
        if n6 is not None:
            if type(n6) is float:
                value = n6 if n6 - n6 == 0.0 else None
            elif type(n6) is int and -_EXACT <= n6 <= _EXACT:
                value = float(n6)
            else:
                value = _number(n6)
            if value is not None:
                if 'node_net_rx_b_s' in series_of:
                    row[18] = value
                else:
                    self.add('node_net_rx_b_s', 'system', value, step, tokens, time, 'B/s', 'Network received')
        n7 = n3.get('net_tx_b') if isinstance(n3, dict) else None
        if n7 is not None:
            if type(n7) is float:
                value = n7 if n7 - n7 == 0.0 else None
            elif type(n7) is int and -_EXACT <= n7 <= _EXACT:
                value = float(n7)
            else:
                value = _number(n7)
            if value is not None:
                if 'node_net_tx_b_s' in series_of:
                    row[19] = value
                else:
                    self.add('node_net_tx_b_s', 'system', value, step, tokens, time, 'B/s', 'Network sent')
        n8 = top.get('cpu') if isinstance(top, dict) else None
        n9 = n8.get('idle') if isinstance(n8, dict) else None
        if n9 is not None:
            if type(n9) is float:
                value = n9 if n9 - n9 == 0.0 else None
            elif type(n9) is int and -_EXACT <= n9 <= _EXACT:
                value = float(n9)
            else:
                value = _number(n9)
            if value is not None:
                value = 1.0 - value
                if 'node_cpu_busy' in series_of:
                    row[20] = value
                else:
                    self.add('node_cpu_busy', 'system', value, step, tokens, time, 'ratio', 'Node CPU busy')
    added = 21 - row.count(None)
    if added:
        self.table.rows.append((step, tokens, time, row))
    return added
