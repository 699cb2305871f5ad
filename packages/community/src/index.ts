export { Community, type CommunityOptions } from './community.ts'
