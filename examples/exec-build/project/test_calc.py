import unittest

import calc


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)

    def test_mean(self):
        self.assertEqual(calc.mean([1, 2, 3]), 2)

    def test_mean_of_nothing(self):
        with self.assertRaises(ValueError):
            calc.mean([])


if __name__ == "__main__":
    unittest.main()
