import { configurations } from './suite.mjs'

configurations({ fullNode: true })
